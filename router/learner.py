"""The one outcome path: every part of the router that learns is a ``Learner``.

``AgentRouter.record`` writes a record to the store; once the transaction commits, the
router folds the committed batch into each of its learners in order: the profile book,
the strategy (through ``StrategyLearner``, since strategies read the book), and the
trust layer. ``refresh`` rebuilds each from the store, in the same order. A learner
never writes on the decision path and never sees a record that was not committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.records import ExecutionRecord

if TYPE_CHECKING:
    from trustroute.profiles.store import Store
    from trustroute.router.strategies import Strategy

#: A committed record and its seq (its task type's execution clock value).
Committed = tuple[ExecutionRecord, int]


@runtime_checkable
class Learner(Protocol):
    """Learns from committed records; can forget everything and rebuild from the store."""

    def fold(self, batch: Sequence[Committed]) -> None:
        """Learn from committed records, in commit order (no I/O)."""
        ...

    def rebuild(self, store: Store) -> None:
        """Forget what was learned and learn it again from ``store``."""
        ...


class StrategyLearner:
    """A strategy as a learner: it observes each record after the book holds it."""

    def __init__(self, strategy: Strategy, book: ProfileBook) -> None:
        self.strategy = strategy
        self.book = book

    def fold(self, batch: Sequence[Committed]) -> None:
        """``observe`` each committed record."""
        for record, seq in batch:
            self.strategy.observe(record, seq, self.book)

    def rebuild(self, store: Store) -> None:
        """``reset`` from the book, which the router rebuilt first."""
        self.strategy.reset(self.book)

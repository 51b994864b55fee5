"""The one outcome path: every part of the router that learns is a ``Learner``.

The router's ``ProfileBook`` places each row of the execution log and gives it its seq
(docs/architecture.md, steps 4 and 5); the placed records are then folded into each
learner in order: the strategy (through ``StrategyLearner``, since strategies read the
book), then the trust layer. A learner never writes on the decision path and never sees
a record that was not committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from trustroute.profiles.book import Committed, ProfileBook

if TYPE_CHECKING:
    from trustroute.profiles.store import Store
    from trustroute.router.strategies import Strategy

__all__ = ["Committed", "Learner", "StrategyLearner"]


@runtime_checkable
class Learner(Protocol):
    """Learns from placed records; can forget everything and learn the whole log again."""

    def fold(self, batch: Sequence[Committed]) -> None:
        """Learn from newly placed records, in the order placed (no I/O)."""
        ...

    def rebuild(self, book: ProfileBook, placed: Sequence[Committed], store: Store) -> None:
        """Forget what was learned and learn it again: ``placed`` is the whole log in log
        order, ``book`` holds it already, ``store`` has the rest (what people said)."""
        ...


class StrategyLearner:
    """A strategy as a learner: it observes each record after the book holds it."""

    def __init__(self, strategy: Strategy, book: ProfileBook) -> None:
        self.strategy = strategy
        self.book = book

    def fold(self, batch: Sequence[Committed]) -> None:
        """``observe`` each placed record."""
        for record, seq in batch:
            self.strategy.observe(record, seq, self.book)

    def rebuild(self, book: ProfileBook, placed: Sequence[Committed], store: Store) -> None:
        """``reset`` from the book (also used when rows arrived out of log order)."""
        self.strategy.reset(book)

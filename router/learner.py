"""The one outcome path: every part of the router that learns is a ``Learner``.

The router's ``ProfileBook`` places each row of the execution log and gives it its seq
(docs/architecture.md, steps 4 and 5); the placed records are then folded into each
learner in order: the strategy (through ``StrategyLearner``, since strategies read the
book), then the trust layer. A learner never writes on the decision path and never sees
a record that was not committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from trustroute.profiles.book import Committed, ProfileBook
from trustroute.profiles.profile import ProfileSettings, WindowEntry
from trustroute.profiles.records import utc_now
from trustroute.router.strategies.base import AmendingStrategy, PreparingStrategy

if TYPE_CHECKING:
    from trustroute.profiles.store import Store
    from trustroute.router.feedback.state import FeedbackState
    from trustroute.router.strategies import Strategy

__all__ = ["Committed", "Learner", "ProfileSnapshots", "StrategyLearner"]


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
    """A strategy as a learner: it observes each record after the book holds it, with
    the quality feedback gave it (a record without quality evidence yet is not observed
    until it has some: ``amend``)."""

    def __init__(self, strategy: Strategy, book: ProfileBook,
                 feedback: FeedbackState | None = None) -> None:
        self.strategy = strategy
        self.book = book
        self.feedback = feedback
        self._prepares = isinstance(strategy, PreparingStrategy)  # checked once: it is slow
        self._amends = isinstance(strategy, AmendingStrategy)
        #: Quality changes amended one by one since the strategy was last rebuilt.
        self.amended = 0

    def fold(self, batch: Sequence[Committed]) -> None:
        """``observe`` each placed record that is quality evidence, then let the
        strategy prepare its next decisions of those task types."""
        for record, seq in batch:
            known, quality = (False, None) if self.feedback is None else \
                self.feedback.quality_of(record.record_id)
            if not known:
                self.strategy.observe(record, seq, self.book)
            elif quality is not None:
                same = quality == record.effective_quality
                self.strategy.observe(record if same else record.model_copy(
                    update={"quality": quality}), seq, self.book)
        self.prepare(dict.fromkeys(record.task_type for record, _ in batch))

    def prepare(self, task_types: Iterable[str]) -> None:
        """``Strategy.prepare`` when the strategy has it: the posterior the next
        ``select`` of each task type reads is brought up to date here, off its path."""
        if self._prepares:
            strategy = cast(PreparingStrategy, self.strategy)
            strategy.prepare(task_types, self.book, utc_now().timestamp())

    def amend(self, agent_id: str, task_type: str, old: WindowEntry | None,
              new: WindowEntry | None) -> None:
        """One record's quality evidence changed (``Strategy.amend`` when the strategy
        has it, else ``reset`` from the book)."""
        self.amended += 1
        if self._amends:
            cast(AmendingStrategy, self.strategy).amend(agent_id, task_type, old, new, self.book)
        else:
            self.strategy.reset(self.book)
        self.prepare([task_type])

    def rebuild(self, book: ProfileBook, placed: Sequence[Committed], store: Store) -> None:
        """``reset`` from the book (also used when rows arrived out of log order)."""
        self.strategy.reset(book)
        self.amended = 0


class ProfileSnapshots:
    """Draws the profile snapshot of each pair a fold changed, while its state is still
    in the CPU's cache: the next ``select()`` finds it ready (``ProfileState.snapshot``
    keeps it while no record arrives and its expertise stays exact), instead of drawing
    it cold after the store write."""

    def __init__(self, book: ProfileBook, settings: ProfileSettings) -> None:
        self.book = book
        self.settings = settings

    def fold(self, batch: Sequence[Committed]) -> None:
        """The snapshot of every pair in ``batch``, as of now."""
        now = utc_now()
        for pair in dict.fromkeys((record.agent_id, record.task_type) for record, _ in batch):
            state = self.book.get(*pair)
            if state is not None:
                state.snapshot(now, self.settings)

    def rebuild(self, book: ProfileBook, placed: Sequence[Committed], store: Store) -> None:
        """Nothing kept: snapshots are drawn when read."""

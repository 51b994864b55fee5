"""The strategy interface: score every eligible arm for one task type.

A strategy is a small object with a ``name`` and a ``score`` method; it may keep its own
incremental state through ``observe`` (one committed record) and ``reset`` (called when
the router (re)loads its profiles from the store). A strategy that keeps state may also
define ``amend(agent_id, task_type, old, new, book)``: feedback changed one record's
quality evidence (``old``/``new`` are its ``WindowEntry`` before and after, a quality of
None meaning no evidence: pending a verdict, or ignored; docs/feedback.md); a strategy
without it is ``reset`` from the book instead (``AmendingStrategy``). It may also
define ``prepare(task_types, book, now)`` (``PreparingStrategy``), called after records
of ``task_types`` were folded, to do ahead the work its next ``score`` of those types
would do (the pooled posterior strategies compute the posterior there, off the
decision's path). The router does the rest: eligibility, load balancing, ranking,
tie-breaking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import (
    ProfileSettings,
    ProfileState,
    TaskTypeProfile,
    WindowEntry,
)
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.agents import AgentSpec


@dataclass(slots=True)
class Arm:
    """One eligible agent for this decision, with what is known about it (read-only)."""

    agent: AgentSpec
    state: ProfileState | None
    profile: TaskTypeProfile

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self.agent.id


@dataclass(frozen=True, slots=True)
class StrategyContext:
    """Everything a strategy may read for one decision."""

    task_type: str
    now: datetime
    book: ProfileBook
    settings: ProfileSettings
    rng: np.random.Generator
    exploit_only: bool = False


#: A reason (one line) and the numbers behind a score.
Explanation = tuple[str, Mapping[str, float]]


class ArmScore:
    """A strategy's verdict on one arm: higher ``score`` is better.

    ``success_probability`` is the strategy's estimate that the arm succeeds (feeds the
    decision's confidence). ``reason`` and ``components`` explain the score: pass them
    ready-made, or pass ``explain`` and ``key`` to have ``explain(key)`` build both when
    first read (one explainer serves every arm of a decision, keyed by arm). Most
    decisions are never read by a person, and formatting a reason for every arm of every
    decision would cost more than choosing among them.
    """

    __slots__ = ("_explain", "_explanation", "_key", "score", "success_probability")

    def __init__(self, score: float, reason: str = "",
                 success_probability: float | None = None,
                 components: Mapping[str, float] | None = None, *,
                 explain: Callable[[Any], Explanation] | None = None, key: Any = None) -> None:
        self.score = score
        self.success_probability = success_probability
        self._explain, self._key = explain, key
        self._explanation = None if explain else (reason, components or {})

    @property
    def explanation(self) -> Explanation:
        """``(reason, components)``: as given, or ``explain(key)`` on first read."""
        if self._explanation is None:
            assert self._explain is not None  # set in __init__ otherwise
            self._explanation = self._explain(self._key)
        return self._explanation

    @property
    def reason(self) -> str:
        """One line that explains the score."""
        return self.explanation[0]

    @property
    def components(self) -> Mapping[str, float]:
        """The numbers that explain the score."""
        return self.explanation[1]

    def __repr__(self) -> str:
        return (f"ArmScore(score={self.score!r}, reason={self.reason!r}, "
                f"success_probability={self.success_probability!r})")


@runtime_checkable
class Strategy(Protocol):
    """Scores arms; see the module docstring for the life cycle."""

    name: str

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        """One ArmScore per arm, in the same order."""
        ...

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Learn from one committed record; ``seq`` is its task type's clock value.

        Records arrive in commit order. ``book`` already holds the record, and may
        already hold later records of the same committed batch.
        """
        ...

    def reset(self, book: ProfileBook) -> None:
        """Rebuild any internal state from a freshly loaded book."""
        ...


@runtime_checkable
class AmendingStrategy(Strategy, Protocol):
    """A strategy that takes a change of one record's quality evidence in place."""

    def amend(self, agent_id: str, task_type: str, old: WindowEntry | None,
              new: WindowEntry | None, book: ProfileBook) -> None:
        """Feedback changed one record's evidence from ``old`` to ``new`` (None: none)."""
        ...


@runtime_checkable
class PreparingStrategy(Strategy, Protocol):
    """A strategy that does ahead, off the decision's path, what its next ``score``
    of some task types would do."""

    def prepare(self, task_types: Iterable[str], book: ProfileBook, now: float) -> None:
        """Records of ``task_types`` were folded; ``now`` is POSIX seconds."""
        ...


class StatelessStrategy:
    """Base for strategies that read the profile book directly and keep no state."""

    name = "stateless"

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Nothing to learn: every decision reads the book."""

    def reset(self, book: ProfileBook) -> None:
        """Nothing to rebuild."""

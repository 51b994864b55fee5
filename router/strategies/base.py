"""The strategy interface: score every eligible arm for one task type.

A strategy is a small object with a ``name`` and a ``score`` method; it may keep its own
incremental state through ``observe`` (one committed record), ``observe_many`` (a
committed batch, which the router applies to the book first and hands over in one
call: a bulk import must not pay per-record overhead) and ``reset`` (called when the
router (re)loads its profiles from the store). The router does the rest: eligibility,
load balancing, ranking, tie-breaking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np
from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileSettings, ProfileState, TaskTypeProfile
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.agents import AgentSpec
from trustroute.router.explanation import Deferred, explained_on_read


@dataclass(frozen=True, slots=True)
class Arm:
    """One eligible agent for this decision, with what is known about it."""

    agent: AgentSpec
    state: ProfileState | None
    profile: TaskTypeProfile

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self.agent.id


@dataclass(slots=True)
class StrategyContext:
    """Everything a strategy may read for one decision (read-only by convention; not
    frozen because ``select()`` builds one per decision and frozen construction costs
    several times as much)."""

    task_type: str
    now: datetime
    book: ProfileBook
    settings: ProfileSettings
    rng: np.random.Generator
    exploit_only: bool = False


@explained_on_read
@dataclass(slots=True)
class ArmScore:
    """A strategy's verdict on one arm: higher ``score`` is better.

    ``success_probability`` is the strategy's estimate that the arm succeeds (feeds the
    decision's confidence); ``components`` are the numbers that explain the score.
    Treat it as read-only; it is not a frozen dataclass only because ``select()`` builds
    one per arm per decision and frozen construction costs about 3.5x as much.
    ``deferred`` builds one whose reason and components are formatted on first read
    (see ``trustroute.router.explanation``).
    """

    score: float
    reason: str
    success_probability: float | None = None
    components: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def deferred(cls, score: float, success_probability: float | None,
                 explainer: Deferred, key: Any) -> ArmScore:
        """A verdict whose reason and components ``explainer.explain(key)`` builds when
        first read."""
        return cls(score, explainer, success_probability, key)  # type: ignore[arg-type]


@runtime_checkable
class Strategy(Protocol):
    """Scores arms; see the module docstring for the life cycle."""

    name: str

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        """One ArmScore per arm, in the same order."""
        ...

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Learn from one committed record (no-op for stateless strategies)."""
        ...

    def observe_many(self, committed: Sequence[tuple[ExecutionRecord, int]],
                     book: ProfileBook) -> None:
        """Learn from committed records, each with its seq (its task type's clock value,
        increasing within a type in batch order), already applied to ``book`` in order.

        Must learn what ``observe`` after each record would; note ``book`` is past the
        whole batch (its clocks are the latest), so anything read from it as of a given
        record must be recovered from the batch. A loop over ``observe`` is correct
        when it reads nothing from the book.
        """
        ...

    def reset(self, book: ProfileBook) -> None:
        """Rebuild any internal state from a freshly loaded book."""
        ...


class StatelessStrategy:
    """Base for strategies that read the profile book directly and keep no state."""

    name = "stateless"

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Nothing to learn: every decision reads the book."""

    def observe_many(self, committed: Sequence[tuple[ExecutionRecord, int]],
                     book: ProfileBook) -> None:
        """Nothing to learn: every decision reads the book."""

    def reset(self, book: ProfileBook) -> None:
        """Nothing to rebuild."""

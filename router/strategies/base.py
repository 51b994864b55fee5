"""The strategy interface: score every eligible arm for one task type.

A strategy is a small object with a ``name`` and a ``score`` method; it may keep its own
incremental state through ``observe`` (one committed record) and ``reset`` (called when
the router (re)loads its profiles from the store). The router does the rest:
eligibility, load balancing, ranking, tie-breaking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileSettings, ProfileState, TaskTypeProfile
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.agents import AgentSpec


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


@dataclass(frozen=True, slots=True)
class StrategyContext:
    """Everything a strategy may read for one decision."""

    task_type: str
    now: datetime
    book: ProfileBook
    settings: ProfileSettings
    rng: np.random.Generator
    exploit_only: bool = False


@dataclass(frozen=True, slots=True)
class ArmScore:
    """A strategy's verdict on one arm: higher ``score`` is better.

    ``success_probability`` is the strategy's estimate that the arm succeeds (feeds the
    decision's confidence); ``components`` are the numbers that explain the score.
    """

    score: float
    reason: str
    success_probability: float | None = None
    components: Mapping[str, float] = field(default_factory=dict)


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


class StatelessStrategy:
    """Base for strategies that read the profile book directly and keep no state."""

    name = "stateless"

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Nothing to learn: every decision reads the book."""

    def reset(self, book: ProfileBook) -> None:
        """Nothing to rebuild."""

"""``confidence_weighted``: the reference ranking, ``expertise x min(1, n / ramp)``."""

from __future__ import annotations

from collections.abc import Sequence

from trustroute.profiles.profile import TaskTypeProfile
from trustroute.router.strategies.base import (
    Arm,
    ArmScore,
    Explanation,
    StatelessStrategy,
    StrategyContext,
)


class ConfidenceWeighted(StatelessStrategy):
    """Rank by adjusted score so a lucky newcomer cannot outrank an established agent."""

    name = "confidence_weighted"

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        """Adjusted score per arm; success probability is the expertise itself."""
        return [verdict(arm.profile) for arm in arms]


def verdict(p: TaskTypeProfile) -> ArmScore:
    """Score and one-line reason of one profile."""
    if p.executions_total == 0:
        return ArmScore(score=p.adjusted_score, reason="no executions yet: adjusted score 0")

    return ArmScore(score=p.adjusted_score, success_probability=p.expertise, explain=explain,
                    key=p)


def explain(p: TaskTypeProfile) -> Explanation:
    """The reason of one profile's score."""
    return (f"expertise {p.expertise:.2f} x confidence {p.confidence:.2f} "
            f"({p.executions_total} runs) = {p.adjusted_score:.3f}"), {}

"""``random``: uniform random choice, the baseline every learning strategy must beat."""

from __future__ import annotations

from collections.abc import Sequence

from trustroute.router.strategies.base import Arm, ArmScore, StatelessStrategy, StrategyContext


class RandomChoice(StatelessStrategy):
    """Every eligible agent is equally likely; nothing is learned."""

    name = "random"

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        """A uniform random score per arm (success probability unknown)."""
        return [ArmScore(score=x, reason="uniform random baseline", components={"random": x})
                for x in ctx.rng.random(len(arms)).tolist()]

"""``confidence_weighted``: the reference ranking, ``expertise x min(1, n / ramp)``."""

from __future__ import annotations

from collections.abc import Sequence

from trustroute.profiles.profile import TaskTypeProfile
from trustroute.router.strategies.base import Arm, ArmScore, StatelessStrategy, StrategyContext

_VERDICT_CACHE_LIMIT = 4096  # cached verdicts before the cache is dropped and rebuilt


class ConfidenceWeighted(StatelessStrategy):
    """Rank by adjusted score so a lucky newcomer cannot outrank an established agent."""

    name = "confidence_weighted"

    def __init__(self) -> None:
        # The verdict is a pure function of an immutable profile snapshot, and the router
        # reuses snapshots between records, so caching by identity saves formatting the
        # reason on every decision. The profile is kept in the entry, so its id cannot be
        # reused while cached.
        self._verdicts: dict[int, tuple[TaskTypeProfile, ArmScore]] = {}

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        """Adjusted score per arm; success probability is the expertise itself."""
        verdicts = self._verdicts
        out = []
        for arm in arms:
            p = arm.profile
            cached = verdicts.get(id(p))
            if cached is None or cached[0] is not p:
                if len(verdicts) >= _VERDICT_CACHE_LIMIT:
                    verdicts.clear()
                cached = verdicts[id(p)] = (p, self._verdict(p))
            out.append(cached[1])
        return out

    @staticmethod
    def _verdict(p: TaskTypeProfile) -> ArmScore:
        """Score and one-line reason of one profile."""
        if p.executions_total == 0:
            reason = "no executions yet: adjusted score 0"
        else:
            reason = (f"expertise {p.expertise:.2f} x confidence {p.confidence:.2f} "
                      f"({p.executions_total} runs) = {p.adjusted_score:.3f}")
        return ArmScore(p.adjusted_score, reason, p.expertise if p.executions_total else None)

"""Replay metrics: mean quality, % of the oracle, cumulative regret, agents chosen.

- mean quality: mean revealed quality of the chosen agents;
- % of oracle: realised quality / the per-task-type oracle's expected quality over the
  same tasks (with drift, the oracle knows the regression);
- cumulative regret: sum over steps of (oracle's mean quality on the task type - the
  chosen agent's mean quality on it), i.e. pseudo-regret, free of outcome noise;
- oracle share: fraction of decisions that went to the oracle's agent (or one as good).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from trustroute.router.replay.loop import RunResult


@dataclass(frozen=True)
class RunMetrics:
    """The figures of one run."""

    mean_quality: float
    oracle_quality: float
    pct_oracle: float
    regret: np.ndarray  # cumulative pseudo-regret per step
    choices: Counter[str]
    oracle_share: float = float("nan")

    @property
    def final_regret(self) -> float:
        """Cumulative regret at the end of the stream."""
        return float(self.regret[-1]) if len(self.regret) else 0.0


def run_metrics(result: RunResult) -> RunMetrics:
    """Metrics of one run."""
    plan = result.plan
    decided = result.chosen >= 0
    steps = np.flatnonzero(decided)
    oracle = plan.oracle
    expected = np.zeros(plan.steps)
    expected[steps] = plan.expected[steps, result.chosen[steps]]
    gap = np.where(decided, np.nan_to_num(oracle) - np.nan_to_num(expected), 0.0)
    realised = float(np.sum(result.quality[steps]))
    oracle_total = float(np.nansum(oracle[steps]))
    choices: Counter[str] = Counter(plan.agents[j] for j in result.chosen[steps])
    return RunMetrics(
        mean_quality=realised / len(steps) if len(steps) else float("nan"),
        oracle_quality=oracle_total / len(steps) if len(steps) else float("nan"),
        pct_oracle=100.0 * realised / oracle_total if oracle_total > 0 else float("nan"),
        regret=np.cumsum(gap), choices=choices,
        oracle_share=float(np.mean(gap[steps] <= 1e-12)) if len(steps) else float("nan"))


class Spread(TypedDict):
    """A number across runs: its mean, sd and 95% CI half-width (None from one run)."""

    mean: float
    sd: float | None
    ci95: float | None


@dataclass
class StrategySummary:
    """One strategy over every run of a replay."""

    strategy: str
    runs: list[RunMetrics] = field(default_factory=list)
    seconds: float = 0.0

    def _stat(self, values: list[float]) -> Spread:
        """Mean, sd and 95% CI half-width; one run says nothing of the spread (None)."""
        arr = np.asarray(values, dtype=float)
        if len(arr) < 2:
            return {"mean": float(arr.mean()), "sd": None, "ci95": None}
        sd = float(arr.std(ddof=1))
        return {"mean": float(arr.mean()), "sd": sd, "ci95": 1.96 * sd / math.sqrt(len(arr))}

    @property
    def pct_oracle(self) -> Spread:
        """Mean, sd and 95% CI half-width of % of oracle across runs."""
        return self._stat([r.pct_oracle for r in self.runs])

    @property
    def mean_quality(self) -> Spread:
        """Mean quality across runs."""
        return self._stat([r.mean_quality for r in self.runs])

    @property
    def oracle_quality(self) -> float:
        """The oracle's mean quality, averaged over runs."""
        return float(np.mean([r.oracle_quality for r in self.runs]))

    @property
    def oracle_share(self) -> Spread:
        """Share of decisions that went to the oracle's agent, across runs."""
        return self._stat([r.oracle_share for r in self.runs])

    @property
    def final_regret(self) -> Spread:
        """Final cumulative regret across runs."""
        return self._stat([r.final_regret for r in self.runs])

    @property
    def regret_curve(self) -> np.ndarray:
        """Mean cumulative regret per step across runs."""
        return np.mean(np.vstack([r.regret for r in self.runs]), axis=0)

    def choice_share(self, top: int | None = None) -> list[tuple[str, float]]:
        """Agents by share of all decisions across runs, most chosen first."""
        total: Counter[str] = sum((r.choices for r in self.runs), Counter())
        n = sum(total.values()) or 1
        return [(a, c / n) for a, c in total.most_common(top)]

    def as_dict(self, curve_points: int = 50) -> dict[str, Any]:
        """JSON-ready summary (the regret curve subsampled to ``curve_points``)."""
        curve = self.regret_curve
        idx = np.unique(np.linspace(0, len(curve) - 1, min(curve_points, len(curve))).astype(int))
        return {
            "strategy": self.strategy,
            "runs": len(self.runs),
            "mean_quality": self.mean_quality,
            "oracle_quality": self.oracle_quality,
            "pct_oracle": self.pct_oracle,
            "final_regret": self.final_regret,
            "oracle_share": self.oracle_share,
            "regret_curve": {"step": (idx + 1).tolist(), "regret": curve[idx].tolist()},
            "agents_chosen": [{"agent": a, "share": s} for a, s in self.choice_share(10)],
            "seconds": self.seconds,
        }

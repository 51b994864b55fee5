"""RunPlan: one replay run's agents, task order, revealed outcomes and oracle.

Every strategy compared in one replay sees the *same* plans (same sampled agents, same
task order, same regression), so differences between strategies are not luck of the
draw. The oracle is the per-task-type oracle: for each task type, the agent with the
best mean quality on it, known in hindsight. With a drift scenario the oracle knows the
regression: from the drift step on, it uses the means of the regressed table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trustroute.router.replay.log import OutcomeLog


@dataclass(frozen=True)
class RunPlan:
    """What one run replays; arrays are aligned with the stream (one row per step)."""

    index: int
    seed: int
    agents: tuple[str, ...]  # the candidate agents of this run
    task_types: tuple[str, ...]  # task type of each step
    quality: np.ndarray  # (steps, agents) revealed quality, NaN where the log has no row
    cost: np.ndarray | None  # (steps, agents) or None
    latency_ms: np.ndarray | None
    expected: np.ndarray  # (steps, agents) that agent's mean quality on the step's type
    drift_step: int | None = None  # first step of the regression, if any
    regressed: str | None = None  # the agent that regresses ...
    regressed_like: str | None = None  # ... to behave like this one

    @property
    def steps(self) -> int:
        """Number of tasks in the stream."""
        return len(self.task_types)

    @property
    def oracle(self) -> np.ndarray:
        """Per step, the expected quality of the per-task-type (and phase) oracle."""
        with np.errstate(all="ignore"):
            best = np.nanmax(np.where(np.isnan(self.expected), -np.inf, self.expected), axis=1)
        return np.where(np.isfinite(best), best, np.nan)


def make_plans(log: OutcomeLog, *, runs: int, seed: int = 0, agents: int | None = None,
               drift: bool = False) -> list[RunPlan]:
    """``runs`` plans: a shuffled task order each, and ``agents`` sampled agents."""
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    available = len(log.agents)
    k = available if agents is None else agents
    if not 1 <= k <= available:
        raise ValueError(f"agents must be between 1 and {available} (agents in the log), "
                         f"got {agents}")
    if drift and k < 2:
        raise ValueError("drift needs at least 2 agents (one regresses to behave like another)")
    overall = log.agent_means()
    per_type = log.type_means()
    type_index = log.type_index()
    plans = []
    for run in range(runs):
        rng = np.random.default_rng([seed, run])
        columns = np.sort(rng.choice(available, size=k, replace=False))
        order = rng.permutation(len(log.tasks))
        # fancy indexing copies, so a regression below never touches the log itself
        cells = np.ix_(order, columns)
        quality, expected = log.quality[cells], per_type[np.ix_(type_index[order], columns)]
        cost, latency = (None if m is None else m[cells] for m in (log.cost, log.latency_ms))
        drift_step = regressed = like = None
        if drift:
            means = overall[columns]
            best, worst = int(np.nanargmax(means)), int(np.nanargmin(means))
            drift_step = len(order) // 2
            for m in (quality, expected, cost, latency):
                if m is not None:
                    m[drift_step:, best] = m[drift_step:, worst]
            regressed, like = log.agents[columns[best]], log.agents[columns[worst]]
        plans.append(RunPlan(
            index=run, seed=int(rng.integers(2**31)),
            agents=tuple(log.agents[c] for c in columns),
            task_types=tuple(log.task_types[i] for i in order),
            quality=quality, cost=cost, latency_ms=latency, expected=expected,
            drift_step=drift_step, regressed=regressed, regressed_like=like))
    return plans

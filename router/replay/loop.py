"""The replay loop: one plan through a real AgentRouter on an in-memory store.

Task by task: ``select`` (agents with no row for the task are excluded), reveal only
the chosen agent's outcome, ``record`` it (success means quality >= the success
threshold, 0.5 by default), exactly as an application would use the router.

Late, partial feedback (``Feedback``): each outcome is judged with probability ``rate``
(the same draws for every strategy of a plan) and reaches the router ``delay`` tasks
later; an outcome never judged never reaches it. The run still counts the quality the
chosen agent delivered at once, whatever the router learns of it.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustroute.router.decision import RoutingDecision
from trustroute.router.replay.plan import RunPlan
from trustroute.router.router import AgentRouter
from trustroute.router.trust.options import TrustOptions

RouterFactory = Callable[[RunPlan], AgentRouter]


@dataclass(frozen=True)
class Feedback:
    """How outcomes reach the router: the share judged, and how many tasks later."""

    rate: float = 1.0
    delay: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:  # also rejects NaN
            raise ValueError(f"feedback_rate must be in [0, 1], got {self.rate}")
        if self.delay < 0:
            raise ValueError(f"feedback_delay must be >= 0 tasks, got {self.delay}")

    @property
    def immediate(self) -> bool:
        """Every outcome judged at once (the plain replay)."""
        return self.rate >= 1.0 and self.delay == 0

    def judged(self, plan: RunPlan) -> np.ndarray:
        """Which steps of ``plan`` get judged: drawn from the plan's seed, so every
        strategy replaying the plan is judged on the same steps."""
        if self.rate >= 1.0:
            return np.ones(plan.steps, dtype=bool)
        return np.random.default_rng([plan.seed, 20]).random(plan.steps) < self.rate


@dataclass(frozen=True)
class ReplayStep:
    """One decision of a replay, handed to an observer (for calibration studies)."""

    plan: RunPlan
    step: int
    decision: RoutingDecision
    quality: float
    success: bool
    expected: float  # the chosen agent's mean quality on this task type (and phase)
    oracle: float


StepObserver = Callable[[ReplayStep], None]


@dataclass(frozen=True)
class RunResult:
    """What one strategy did on one plan; arrays are aligned with the stream."""

    strategy: str
    plan: RunPlan
    chosen: np.ndarray  # index into plan.agents per step, -1 where no agent had a row
    quality: np.ndarray  # revealed quality per step (NaN when skipped)
    seconds: float = 0.0


def strategy_router(strategy: str, params: Mapping[str, Any] | None = None) -> RouterFactory:
    """A factory building a fresh in-memory router with ``strategy`` for each plan.

    The decision log is off: it only persists decisions for later audits (it does not
    change which agent is chosen) and writing every candidate of every decision would
    dominate a replay.
    """
    def build(plan: RunPlan) -> AgentRouter:
        return AgentRouter(agents=list(plan.agents), store="mem://", seed=plan.seed,
                           strategy=strategy, strategy_params=dict(params or {}),
                           trust=TrustOptions(log_decisions=False))
    return build


def replay_run(plan: RunPlan, factory: RouterFactory, *, label: str = "",
               success_threshold: float = 0.5, observer: StepObserver | None = None,
               on_step: Callable[[], None] | None = None,
               feedback: Feedback | None = None) -> RunResult:
    """Replay ``plan`` through the router ``factory`` builds; returns what was chosen.

    ``feedback`` makes outcomes reach the router late and only in part (see the
    module docstring); by default every outcome is recorded at once.
    """
    feedback = feedback or Feedback()
    judged = feedback.judged(plan)
    waiting: deque[tuple[int, RoutingDecision, float, int]] = deque()  # due step first
    started = time.perf_counter()
    position = {a: j for j, a in enumerate(plan.agents)}
    missing = np.isnan(plan.quality)
    chosen = np.full(plan.steps, -1, dtype=np.int64)
    revealed = np.full(plan.steps, np.nan)
    oracle = plan.oracle
    with factory(plan) as router:
        for step, task_type in enumerate(plan.task_types):
            row_missing = missing[step]
            if row_missing.all():
                continue
            exclude = [plan.agents[j] for j in np.flatnonzero(row_missing)]
            decision = router.select(task_type, exclude=exclude)
            j = position[decision.agent_id]
            quality = float(plan.quality[step, j])
            success = quality >= success_threshold
            if feedback.immediate:
                _record(router, plan, decision, quality, success_threshold, step, j)
            else:
                decision.release()
                if judged[step]:
                    waiting.append((step + feedback.delay, decision, quality, j))
                while waiting and waiting[0][0] <= step:
                    due, late, value, k = waiting.popleft()
                    _record(router, plan, late, value, success_threshold, due - feedback.delay,
                            k)
            chosen[step] = j
            revealed[step] = quality
            if observer is not None:
                observer(ReplayStep(plan, step, decision, quality, success,
                                    float(plan.expected[step, j]), float(oracle[step])))
            if on_step is not None:
                on_step()
    return RunResult(label or router.strategy.name, plan, chosen, revealed,
                     time.perf_counter() - started)


def _record(router: AgentRouter, plan: RunPlan, decision: RoutingDecision, quality: float,
            success_threshold: float, step: int, j: int) -> None:
    """Record the outcome of ``decision`` (made at ``step`` on the plan's agent ``j``)."""
    router.record(decision, success=quality >= success_threshold, quality=quality,
                  latency_ms=_cell(plan.latency_ms, step, j) or 0.0,
                  cost=_cell(plan.cost, step, j))


def _cell(matrix: np.ndarray | None, step: int, j: int) -> float | None:
    """The log's value for the chosen agent at this step; None where the log has none."""
    value = math.nan if matrix is None else float(matrix[step, j])
    return None if math.isnan(value) else value

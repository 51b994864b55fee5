"""The replay loop: one plan through a real AgentRouter on an in-memory store.

Task by task: ``select`` (agents with no row for the task are excluded), reveal only
the chosen agent's outcome, ``record`` it (success means quality >= the success
threshold, 0.5 by default), exactly as an application would use the router.

Late, partial feedback (``Feedback``) goes through the product's path, as a service
with an LLM judge or users' thumbs would: the router runs under a feedback policy with
``wait_s > 0`` and ``default: ignore`` (``Feedback.policy``), each execution is recorded
at decision time without a quality (pending: a run, not evidence yet), and an outcome
judged (with probability ``rate``, the same draws for every strategy of a plan) reaches
it ``delay`` tasks later as ``router.feedback(decision_id, score=quality,
key="evaluator")``; an outcome never judged never becomes evidence. The run still counts
the quality the chosen agent delivered at once, whatever the router learns of it.
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
from trustroute.router.feedback.policy import EVALUATOR_KEY, FeedbackPolicy
from trustroute.router.replay.plan import RunPlan
from trustroute.router.router import AgentRouter
from trustroute.router.trust.options import TrustOptions

RouterFactory = Callable[[RunPlan], AgentRouter]
#: How long a replayed run awaits its verdict: longer than any replay lasts, so no run
#: is settled by the default while its verdict may still come (and with ``ignore`` the
#: default would add no evidence anyway).
REPLAY_WAIT_S = 7 * 86_400.0


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

    @property
    def policy(self) -> FeedbackPolicy | None:
        """The router's feedback policy for this replay (None: quality known at record
        time): runs await a verdict, and one never judged is never evidence."""
        return None if self.immediate else FeedbackPolicy(wait_s=REPLAY_WAIT_S,
                                                          default="ignore")


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


def strategy_router(strategy: str, params: Mapping[str, Any] | None = None,
                    feedback: Feedback | None = None) -> RouterFactory:
    """A factory building a fresh in-memory router with ``strategy`` for each plan,
    under ``feedback``'s policy (``Feedback.policy``).

    The decision log is off: it only persists decisions for later audits (it does not
    change which agent is chosen) and writing every candidate of every decision would
    dominate a replay.
    """
    def build(plan: RunPlan) -> AgentRouter:
        return AgentRouter(agents=list(plan.agents), store="mem://", seed=plan.seed,
                           strategy=strategy, strategy_params=dict(params or {}),
                           trust=TrustOptions(log_decisions=False),
                           feedback=None if feedback is None else feedback.policy)
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
    waiting: deque[tuple[int, str, float]] = deque()  # (due step, decision id, quality)
    started = time.perf_counter()
    position = {a: j for j, a in enumerate(plan.agents)}
    missing = np.isnan(plan.quality)
    chosen = np.full(plan.steps, -1, dtype=np.int64)
    revealed = np.full(plan.steps, np.nan)
    oracle = plan.oracle
    with factory(plan) as router:
        if not feedback.immediate and router.feedback_policy.wait_s <= 0:
            raise ValueError("late, partial feedback needs a router whose feedback policy "
                             "has wait_s > 0 (see Feedback.policy)")
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
                _record(router, plan, decision, step, j, success=success, quality=quality)
            else:  # the agent ran (nothing raised); how well, only a verdict will say
                _record(router, plan, decision, step, j, success=True, quality=None)
                if judged[step]:
                    waiting.append((step + feedback.delay, decision.decision_id, quality))
                while waiting and waiting[0][0] <= step:
                    _, decision_id, value = waiting.popleft()
                    router.feedback(decision_id, score=value, key=EVALUATOR_KEY)
            chosen[step] = j
            revealed[step] = quality
            if observer is not None:
                observer(ReplayStep(plan, step, decision, quality, success,
                                    float(plan.expected[step, j]), float(oracle[step])))
            if on_step is not None:
                on_step()
    return RunResult(label or router.strategy.name, plan, chosen, revealed,
                     time.perf_counter() - started)


def _record(router: AgentRouter, plan: RunPlan, decision: RoutingDecision, step: int,
            j: int, *, success: bool, quality: float | None) -> None:
    """Record the execution of ``decision`` (made at ``step`` on the plan's agent ``j``)."""
    router.record(decision, success=success, quality=quality,
                  latency_ms=_cell(plan.latency_ms, step, j) or 0.0,
                  cost=_cell(plan.cost, step, j))


def _cell(matrix: np.ndarray | None, step: int, j: int) -> float | None:
    """The log's value for the chosen agent at this step; None where the log has none."""
    value = math.nan if matrix is None else float(matrix[step, j])
    return None if math.isnan(value) else value

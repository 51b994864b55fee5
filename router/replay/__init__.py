"""Offline evaluation of routing strategies on full-information outcome logs.

``load_outcomes`` reads a CSV/JSONL log, ``replay`` streams its tasks through real
routers (in-memory store) and summarises mean quality, % of the per-task-type oracle,
cumulative regret and the agents chosen. See docs/learning.md.
"""

from trustroute.router.replay.log import (
    OutcomeLog,
    OutcomeLogError,
    load_outcomes,
    outcomes_from_rows,
)
from trustroute.router.replay.loop import (
    Feedback,
    ReplayStep,
    RouterFactory,
    RunResult,
    replay_run,
    strategy_router,
)
from trustroute.router.replay.metrics import RunMetrics, StrategySummary, run_metrics
from trustroute.router.replay.plan import RunPlan, make_plans
from trustroute.router.replay.runner import ReplayReport, StrategySpec, replay, total_steps

__all__ = [
    "Feedback",
    "OutcomeLog",
    "OutcomeLogError",
    "ReplayReport",
    "ReplayStep",
    "RouterFactory",
    "RunMetrics",
    "RunPlan",
    "RunResult",
    "StrategySpec",
    "StrategySummary",
    "load_outcomes",
    "make_plans",
    "outcomes_from_rows",
    "replay",
    "replay_run",
    "run_metrics",
    "strategy_router",
    "total_steps",
]

"""The simulated workload behind ``trustroute demo``: agents with hidden skill per task type.

``workload`` describes the simulated world (pure), ``runner`` routes it through a real
``AgentRouter`` (select, then record), ``summary`` turns the run into a leaderboard and
the comparison with the best single agent, random choice and the oracle (pure).
"""

from trustroute.router.demo.runner import DemoRun, TaskResult, run_demo
from trustroute.router.demo.summary import DemoSummary, LeaderboardRow, Preference, summarize
from trustroute.router.demo.workload import DEFAULT_WORKLOAD, Outcome, SimulatedAgent, Workload

__all__ = [
    "DEFAULT_WORKLOAD",
    "DemoRun",
    "DemoSummary",
    "LeaderboardRow",
    "Outcome",
    "Preference",
    "SimulatedAgent",
    "TaskResult",
    "Workload",
    "run_demo",
    "summarize",
]

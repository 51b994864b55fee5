"""Route a simulated workload through a real router: ``select``, run, ``record``.

The router learns only from what it records, exactly as in production; the hidden skill
is used to simulate outcomes and, afterwards, to judge how well routing did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from trustroute.profiles.profile import TaskTypeProfile
from trustroute.router.demo.workload import Workload
from trustroute.router.router import AgentRouter


@dataclass(frozen=True, slots=True)
class TaskResult:
    """One routed task: who got it and how it went."""

    index: int
    task_type: str
    agent_id: str
    quality: float
    success: bool
    expected_quality: float
    latency_ms: float
    cost: float


@dataclass
class DemoRun:
    """Everything a run produced, for ``summarize``."""

    workload: Workload
    strategy: str
    seed: int
    executions_before: int
    results: list[TaskResult] = field(default_factory=list)
    profiles: dict[tuple[str, str], TaskTypeProfile] = field(default_factory=dict)


def run_demo(router: AgentRouter, workload: Workload, *, tasks: int = 400, seed: int = 0,
             on_result: Callable[[TaskResult], None] | None = None) -> DemoRun:
    """Route ``tasks`` simulated tasks with ``router.select`` and ``router.record``.

    Every agent registered with the router must be part of the workload (there is no
    way to simulate the others). The task stream depends only on ``seed``, so two
    strategies run with one seed see the same tasks.
    """
    unknown = sorted(set(router.agents) - set(workload.agent_ids))
    if unknown:
        raise ValueError(f"agent(s) {', '.join(map(repr, unknown))} are registered with the "
                         "router but not simulated by the workload")
    stream = workload.tasks(tasks, np.random.default_rng(seed))
    outcomes_rng = np.random.default_rng([seed, 1])
    run = DemoRun(workload, router.strategy.name, seed,
                  sum(state.executions_total for state in router.book))
    for index, task_type in enumerate(stream):
        decision = router.select(task_type)
        outcome = workload.outcome(decision.agent_id, task_type, outcomes_rng)
        router.record(decision, success=outcome.success, quality=outcome.quality,
                      latency_ms=outcome.latency_ms, cost=outcome.cost,
                      metadata={"source": "trustroute demo"})
        result = TaskResult(index, task_type, decision.agent_id, outcome.quality,
                            outcome.success, workload.skill(decision.agent_id, task_type),
                            outcome.latency_ms, outcome.cost)
        run.results.append(result)
        if on_result is not None:
            on_result(result)
    run.profiles = {(agent_id, task_type): router.profile(agent_id, task_type)
                    for task_type in workload.task_types for agent_id in workload.agent_ids}
    return run

"""A simulated world: agents whose skill per task type the router cannot see.

Each agent has a hidden mean quality per task type. One task's quality is drawn from a
Beta distribution around that mean (``concentration`` sets how noisy single tasks are:
Beta(k*m, k*(1-m)) has mean m and variance m(1-m)/(k+1)); a task succeeds when its
quality reaches ``success_threshold``. Latency is log-normal around the agent's median,
cost is a fixed price per call. Pure: randomness comes from the generator passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from trustroute.router.agents import AgentSpec


@dataclass(frozen=True, slots=True)
class SimulatedAgent:
    """One simulated agent and its hidden mean quality per task type."""

    id: str
    skill: Mapping[str, float]
    latency_ms: float = 1000.0
    cost: float = 0.01


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one simulated execution produced."""

    success: bool
    quality: float
    latency_ms: float
    cost: float


@dataclass(frozen=True)
class Workload:
    """Agents, the task types they are given, and how noisy a single task is."""

    agents: tuple[SimulatedAgent, ...]
    task_types: tuple[str, ...]
    concentration: float = 10.0
    success_threshold: float = 0.5
    latency_sigma: float = 0.3
    _by_id: dict[str, SimulatedAgent] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.agents or not self.task_types:
            raise ValueError("a workload needs at least one agent and one task type")
        if len(set(self.task_types)) != len(self.task_types):
            raise ValueError("task types of a workload must be distinct")
        if not self.concentration > 0:
            raise ValueError("concentration must be > 0")
        by_id: dict[str, SimulatedAgent] = {}
        for agent in self.agents:
            if agent.id in by_id:
                raise ValueError(f"simulated agent {agent.id!r} is listed twice")
            for task_type in self.task_types:
                mean = agent.skill.get(task_type)
                if mean is None or not 0.0 < mean < 1.0:
                    raise ValueError(f"agent {agent.id!r} needs a skill in (0, 1) for task "
                                     f"type {task_type!r}, got {mean!r}")
            by_id[agent.id] = agent
        object.__setattr__(self, "_by_id", by_id)

    @property
    def agent_ids(self) -> list[str]:
        """Agent ids in declaration order."""
        return [a.id for a in self.agents]

    def agent_specs(self) -> list[AgentSpec]:
        """Router registry entries for the simulated agents (every task type, their price)."""
        return [AgentSpec(id=a.id, cost_per_call=a.cost) for a in self.agents]

    def skill(self, agent_id: str, task_type: str) -> float:
        """The hidden mean quality of one agent on one task type."""
        try:
            agent = self._by_id[agent_id]
        except KeyError:
            raise ValueError(f"agent {agent_id!r} is not part of the simulated workload"
                             ) from None
        return float(agent.skill[task_type])

    def best_agent(self, task_type: str) -> str:
        """The agent with the highest hidden skill on ``task_type`` (first on ties)."""
        return max(self.agents, key=lambda a: a.skill[task_type]).id

    def tasks(self, count: int, rng: np.random.Generator) -> list[str]:
        """A stream of ``count`` task types, drawn uniformly."""
        if count < 1:
            raise ValueError(f"the number of tasks must be >= 1, got {count}")
        picks = rng.integers(0, len(self.task_types), size=count)
        return [self.task_types[int(i)] for i in picks]

    def outcome(self, agent_id: str, task_type: str, rng: np.random.Generator) -> Outcome:
        """Run one simulated task: draw its quality, success, latency and cost."""
        mean = self.skill(agent_id, task_type)
        agent = self._by_id[agent_id]
        k = self.concentration
        quality = float(rng.beta(k * mean, k * (1.0 - mean)))
        latency = float(agent.latency_ms * np.exp(self.latency_sigma * rng.standard_normal()))
        return Outcome(quality >= self.success_threshold, quality, latency, agent.cost)

    def expected_qualities(self, task_types: Sequence[str]) -> dict[str, float]:
        """Per agent: the mean hidden skill over a stream of task types (always picking it)."""
        return {a.id: float(np.mean([a.skill[t] for t in task_types])) for a in self.agents}


def _agent(agent_id: str, latency_ms: float, cost: float, code: float, math: float,
           writing: float, support: float) -> SimulatedAgent:
    skill = {"code": code, "math": math, "writing": writing, "support": support}
    return SimulatedAgent(agent_id, skill, latency_ms, cost)


# A specialist per task type, a generalist that is the best single agent overall, and a
# cheap, fast, mediocre one: routing by task type should beat any single agent.
DEFAULT_WORKLOAD = Workload(
    agents=(
        _agent("generalist", 1200.0, 0.010, code=0.70, math=0.68, writing=0.72, support=0.70),
        _agent("coder", 1500.0, 0.012, code=0.90, math=0.75, writing=0.45, support=0.50),
        _agent("writer", 900.0, 0.008, code=0.40, math=0.35, writing=0.90, support=0.80),
        _agent("analyst", 2000.0, 0.015, code=0.65, math=0.92, writing=0.55, support=0.45),
        _agent("budget", 400.0, 0.001, code=0.55, math=0.50, writing=0.60, support=0.65),
    ),
    task_types=("code", "math", "writing", "support"),
)

"""Judge a demo run against what could have been done: pure arithmetic over the run.

All baselines are computed on the run's own task stream from the hidden skills
(expected quality), so they carry no sampling noise of their own:

- best single agent: always send every task to the one agent with the best mean;
- random: pick uniformly among the agents for every task;
- oracle: send each task to the agent with the best hidden skill on its task type.

The routed figure is given both as observed (mean of the drawn qualities) and as
expected (mean hidden skill of the chosen agents), the latter comparable to baselines.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trustroute.profiles.profile import empty_profile
from trustroute.router.demo.runner import DemoRun, TaskResult

SEGMENTS = 4  # the learning curve: expected quality per quarter of the run


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    """One agent on one task type after the run."""

    task_type: str
    rank: int
    agent_id: str
    routed: int
    share: float
    observed_quality: float | None
    hidden_skill: float
    is_best: bool
    runs: int
    expertise: float
    confidence: float
    adjusted_score: float


@dataclass(frozen=True, slots=True)
class Preference:
    """Which agent the router settled on for a task type: the most routed-to agent over
    the last quarter of that type's tasks (robust to a sampling strategy's single draws).
    """

    agent_id: str
    share: float
    tasks: int
    is_best: bool


@dataclass(frozen=True)
class DemoSummary:
    """The leaderboard per task type and the comparison with the baselines."""

    tasks: int
    strategy: str
    seed: int
    executions_before: int
    routed_quality: float
    routed_expected_quality: float
    best_single_agent: str
    best_single_quality: float
    random_quality: float
    oracle_quality: float
    best_pick_rate: float
    learning_curve: list[float]
    preferred: dict[str, Preference]
    leaderboard: dict[str, list[LeaderboardRow]]

    @property
    def share_of_oracle(self) -> float:
        """Routed expected quality as a fraction of the oracle's."""
        return self.routed_expected_quality / self.oracle_quality

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (asdict converts the nested rows and preferences too)."""
        return {**asdict(self), "share_of_oracle": self.share_of_oracle}


def _rows(run: DemoRun, task_type: str, results: list[TaskResult]) -> list[LeaderboardRow]:
    workload = run.workload
    best = workload.best_agent(task_type)
    total = len(results)
    stats = []
    for agent_id in workload.agent_ids:
        mine = [r.quality for r in results if r.agent_id == agent_id]
        stats.append((agent_id, len(mine), float(np.mean(mine)) if mine else None))
    stats.sort(key=lambda s: (-s[1], -(s[2] if s[2] is not None else -1.0), s[0]))
    rows = []
    for rank, (agent_id, routed, observed) in enumerate(stats, start=1):
        profile = run.profiles.get((agent_id, task_type)) or empty_profile(agent_id, task_type)
        rows.append(LeaderboardRow(
            task_type=task_type, rank=rank, agent_id=agent_id, routed=routed,
            share=routed / total if total else 0.0, observed_quality=observed,
            hidden_skill=workload.skill(agent_id, task_type), is_best=agent_id == best,
            runs=profile.executions_total, expertise=profile.expertise,
            confidence=profile.confidence, adjusted_score=profile.adjusted_score))
    return rows


def _preference(run: DemoRun, task_type: str, results: list[TaskResult]) -> Preference | None:
    if not results:
        return None
    tail = results[-max(1, len(results) // SEGMENTS):]
    counts = Counter(r.agent_id for r in tail)
    best = run.workload.best_agent(task_type)
    agent_id = max(counts, key=lambda a: (counts[a], a == best))
    return Preference(agent_id, counts[agent_id] / len(tail), len(tail), agent_id == best)


def summarize(run: DemoRun) -> DemoSummary:
    """Leaderboards and baselines for a finished run."""
    if not run.results:
        raise ValueError("the demo run has no results to summarize")
    workload = run.workload
    stream = [r.task_type for r in run.results]
    per_agent = workload.expected_qualities(stream)
    best_single = max(per_agent, key=lambda a: per_agent[a])
    skills = np.array([[workload.skill(a, t) for a in workload.agent_ids] for t in stream])
    expected = np.array([r.expected_quality for r in run.results])
    best_picks = [r.agent_id == workload.best_agent(r.task_type) for r in run.results]
    curve = [float(seg.mean()) for seg in np.array_split(expected, SEGMENTS) if seg.size]
    by_type = {t: [r for r in run.results if r.task_type == t] for t in workload.task_types}
    leaderboard = {t: _rows(run, t, results) for t, results in by_type.items()}
    preferred = {t: p for t, results in by_type.items()
                 if (p := _preference(run, t, results)) is not None}
    return DemoSummary(
        tasks=len(run.results), strategy=run.strategy, seed=run.seed,
        executions_before=run.executions_before,
        routed_quality=float(np.mean([r.quality for r in run.results])),
        routed_expected_quality=float(expected.mean()),
        best_single_agent=best_single, best_single_quality=per_agent[best_single],
        random_quality=float(skills.mean()), oracle_quality=float(skills.max(axis=1).mean()),
        best_pick_rate=float(np.mean(best_picks)), learning_curve=curve,
        preferred=preferred, leaderboard=leaderboard,
    )

"""The demo's simulated world and its judge: pure and reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from trustroute.router import AgentRouter
from trustroute.router.demo import (
    DEFAULT_WORKLOAD,
    SimulatedAgent,
    TaskResult,
    Workload,
    run_demo,
    summarize,
)
from trustroute.router.demo.runner import DemoRun

TINY = Workload(
    agents=(SimulatedAgent("good", {"x": 0.9, "y": 0.2}, 100.0, 0.5),
            SimulatedAgent("bad", {"x": 0.3, "y": 0.6}, 300.0, 0.1)),
    task_types=("x", "y"),
)


def test_outcomes_follow_the_hidden_skill() -> None:
    rng = np.random.default_rng(0)
    draws = [TINY.outcome("good", "x", rng) for _ in range(4000)]
    qualities = np.array([o.quality for o in draws])
    assert abs(qualities.mean() - 0.9) < 0.01
    assert qualities.min() >= 0.0 and qualities.max() <= 1.0
    # success is "quality reached the threshold", so it tracks quality exactly
    assert all(o.success == (o.quality >= 0.5) for o in draws)
    assert {o.cost for o in draws} == {0.5}
    assert abs(np.median([o.latency_ms for o in draws]) - 100.0) < 5.0


def test_same_seed_same_world() -> None:
    a = DEFAULT_WORKLOAD.tasks(50, np.random.default_rng(3))
    b = DEFAULT_WORKLOAD.tasks(50, np.random.default_rng(3))
    assert a == b and set(a) <= set(DEFAULT_WORKLOAD.task_types)
    one = DEFAULT_WORKLOAD.outcome("coder", "code", np.random.default_rng(9))
    two = DEFAULT_WORKLOAD.outcome("coder", "code", np.random.default_rng(9))
    assert one == two


@pytest.mark.parametrize(("agents", "task_types", "match"), [
    ((), ("x",), "at least one agent"),
    ((SimulatedAgent("a", {"x": 0.5}),), ("x", "x"), "distinct"),
    ((SimulatedAgent("a", {"x": 0.5}), SimulatedAgent("a", {"x": 0.4})), ("x",), "twice"),
    ((SimulatedAgent("a", {"x": 1.0}),), ("x",), r"skill in \(0, 1\)"),
    ((SimulatedAgent("a", {"x": 0.5}),), ("x", "y"), "'y'"),
])
def test_bad_workloads_are_rejected(agents: tuple[SimulatedAgent, ...],
                                    task_types: tuple[str, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Workload(agents=agents, task_types=task_types)


def test_default_workload_rewards_routing_by_task_type() -> None:
    w = DEFAULT_WORKLOAD
    best = {t: w.best_agent(t) for t in w.task_types}
    assert len(set(best.values())) >= 3  # specialists differ by task type
    per_agent = w.expected_qualities(list(w.task_types))
    best_single = max(per_agent.values())
    oracle = float(np.mean([w.skill(best[t], t) for t in w.task_types]))
    assert oracle - best_single > 0.1  # so routing has something to win


def _result(i: int, task_type: str, agent: str, quality: float) -> TaskResult:
    return TaskResult(i, task_type, agent, quality, quality >= 0.5,
                      TINY.skill(agent, task_type), 0.0, 0.0)


def test_summary_baselines_by_hand() -> None:
    run = DemoRun(TINY, "test", 0, executions_before=5)
    run.results = [_result(0, "x", "good", 0.8), _result(1, "y", "good", 0.1),
                   _result(2, "y", "bad", 0.7), _result(3, "x", "good", 1.0)]
    s = summarize(run)
    assert s.tasks == 4 and s.executions_before == 5
    assert s.routed_quality == pytest.approx((0.8 + 0.1 + 0.7 + 1.0) / 4)
    assert s.routed_expected_quality == pytest.approx((0.9 + 0.2 + 0.6 + 0.9) / 4)
    # stream x, y, y, x: good averages 0.55, bad 0.45
    assert s.best_single_agent == "good"
    assert s.best_single_quality == pytest.approx(0.55)
    assert s.random_quality == pytest.approx(0.5)
    assert s.oracle_quality == pytest.approx(0.75)
    assert s.best_pick_rate == pytest.approx(0.75)
    assert s.learning_curve == pytest.approx([0.9, 0.2, 0.6, 0.9])
    x_rows = s.leaderboard["x"]
    assert [(r.agent_id, r.routed, r.is_best) for r in x_rows] == [("good", 2, True),
                                                                   ("bad", 0, False)]
    assert x_rows[0].observed_quality == pytest.approx(0.9)
    assert x_rows[1].observed_quality is None
    y_rows = s.leaderboard["y"]
    assert [r.agent_id for r in y_rows] == ["bad", "good"]  # equal counts: better quality first
    # the last quarter of each type's tasks: x -> [good], y -> [bad]
    assert (s.preferred["x"].agent_id, s.preferred["x"].is_best) == ("good", True)
    assert (s.preferred["y"].agent_id, s.preferred["y"].is_best) == ("bad", True)
    assert s.preferred["x"].share == 1.0 and s.preferred["x"].tasks == 1
    data = s.as_dict()
    assert data["preferred"]["y"]["agent_id"] == "bad"
    assert data["share_of_oracle"] == pytest.approx(s.routed_expected_quality / 0.75)
    assert data["leaderboard"]["x"][0]["agent_id"] == "good"


def test_run_demo_routes_and_records_through_the_router() -> None:
    seen: list[TaskResult] = []
    with AgentRouter(agents=DEFAULT_WORKLOAD.agent_specs(), store="mem://", seed=1) as r:
        run = run_demo(r, DEFAULT_WORKLOAD, tasks=120, seed=1, on_result=seen.append)
        assert r.store.executions.count() == 120
        stored = sum(p.executions_total for p in r.profiles())
    assert stored == 120 and seen == run.results
    assert [res.index for res in run.results] == list(range(120))
    assert run.executions_before == 0
    for res in run.results:
        assert res.expected_quality == DEFAULT_WORKLOAD.skill(res.agent_id, res.task_type)
    assert set(run.profiles) == {(a, t) for a in DEFAULT_WORKLOAD.agent_ids
                                 for t in DEFAULT_WORKLOAD.task_types}
    counted = {key: p.executions_total for key, p in run.profiles.items()}
    for res in run.results:
        assert counted[(res.agent_id, res.task_type)] >= 1
    assert sum(counted.values()) == 120


def test_run_demo_is_reproducible_under_a_seed() -> None:
    picks = []
    for _ in range(2):
        with AgentRouter(agents=DEFAULT_WORKLOAD.agent_specs(), store="mem://", seed=4) as r:
            run = run_demo(r, DEFAULT_WORKLOAD, tasks=60, seed=4)
        picks.append([(res.agent_id, res.quality) for res in run.results])
    assert picks[0] == picks[1]


def test_run_demo_refuses_agents_it_cannot_simulate() -> None:
    with AgentRouter(agents=["coder", "mystery"], store="mem://") as r, \
            pytest.raises(ValueError, match="'mystery'"):
        run_demo(r, DEFAULT_WORKLOAD, tasks=5)

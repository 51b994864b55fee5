"""Replay engine: plans, the select/record loop through real routers, metrics."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from trustroute.router import AgentRouter
from trustroute.router.replay import (
    Feedback,
    OutcomeLog,
    ReplayStep,
    RouterFactory,
    RunPlan,
    RunResult,
    StrategySpec,
    make_plans,
    outcomes_from_rows,
    replay,
    run_metrics,
    strategy_router,
)


def synthetic_log(seed: int = 0, tasks: int = 80) -> OutcomeLog:
    """4 agents of known skill on 2 task types; agent d has no row for some tasks."""
    rng = np.random.default_rng(seed)
    skill = {"a": (0.1, 0.2), "b": (0.9, 0.6), "c": (0.5, 0.85), "d": (0.4, 0.4)}
    rows = []
    for t in range(tasks):
        kind = t % 2
        for agent, p in skill.items():
            if agent == "d" and t % 10 == 0:
                continue
            rows.append({"agent": agent, "task_type": ("x", "y")[kind], "task": f"t{t}",
                         "quality": float(rng.random() < p[kind])})
    return outcomes_from_rows(rows)


def test_plans_are_seeded_and_shared() -> None:
    log = synthetic_log()
    a = make_plans(log, runs=3, seed=5, agents=3)
    b = make_plans(log, runs=3, seed=5, agents=3)
    c = make_plans(log, runs=3, seed=6, agents=3)
    assert [p.agents for p in a] == [p.agents for p in b]
    assert all(np.array_equal(x.quality, y.quality, equal_nan=True)
               for x, y in zip(a, b, strict=True))
    assert [p.task_types for p in a] != [p.task_types for p in c]
    assert all(len(p.agents) == 3 and p.steps == 80 for p in a)
    assert len({p.task_types for p in a}) == 3  # each run its own order


def test_drift_plan_regresses_the_best_agent_to_the_worst() -> None:
    log = synthetic_log()
    plan = make_plans(log, runs=1, drift=True)[0]
    assert plan.regressed == "b" and plan.regressed_like == "a"  # best / worst overall
    b, a = plan.agents.index("b"), plan.agents.index("a")
    half = plan.drift_step
    assert half == 40
    assert np.array_equal(plan.quality[half:, b], plan.quality[half:, a], equal_nan=True)
    assert not np.array_equal(plan.quality[:half, b], plan.quality[:half, a])
    # the oracle knows: after the regression, "b" is no longer the best on "x"
    x_before = next(s for s in range(half) if plan.task_types[s] == "x")
    x_after = next(s for s in range(half, plan.steps) if plan.task_types[s] == "x")
    assert plan.oracle[x_after] < plan.oracle[x_before]


def test_bad_plan_arguments() -> None:
    log = synthetic_log()
    with pytest.raises(ValueError, match="agents must be between 1 and 4"):
        make_plans(log, runs=1, agents=9)
    with pytest.raises(ValueError, match="runs must be >= 1"):
        make_plans(log, runs=0)
    with pytest.raises(ValueError, match="drift needs at least 2 agents"):
        make_plans(log, runs=1, agents=1, drift=True)


def test_metrics_of_a_known_run() -> None:
    log = synthetic_log()
    plan = make_plans(log, runs=1)[0]
    best = np.nanargmax(plan.expected, axis=1)  # always pick the oracle's agent
    chosen = best.copy()
    quality = plan.quality[np.arange(plan.steps), chosen]
    ok = ~np.isnan(quality)
    chosen[~ok] = -1  # skip steps where the oracle agent has no row
    m = run_metrics(RunResult("oracle", plan, chosen, np.where(ok, quality, np.nan)))
    assert m.final_regret == pytest.approx(0.0)
    assert m.oracle_share == 1.0
    assert m.mean_quality == pytest.approx(float(np.nanmean(quality)))
    assert sum(m.choices.values()) == int(ok.sum())
    worst = np.nanargmin(plan.expected, axis=1)
    q = plan.quality[np.arange(plan.steps), worst]
    bad = run_metrics(RunResult("worst", plan, np.where(np.isnan(q), -1, worst), q))
    assert bad.final_regret > 20
    assert bad.oracle_share == 0.0
    assert bad.pct_oracle < 40


def test_replay_reveals_only_the_chosen_outcome_and_respects_missing_rows() -> None:
    log = synthetic_log()
    seen: list[ReplayStep] = []
    report = replay(log, ["thompson"], runs=1, seed=2, observer=seen.append)
    result = report.results["thompson"][0]
    plan = result.plan
    assert len(seen) == plan.steps == 80
    for step in seen:
        j = plan.agents.index(step.decision.agent_id)
        assert step.quality == plan.quality[step.step, j]  # the chosen agent's own row
        assert not np.isnan(step.quality)  # agents without a row are never chosen
        assert step.success == (step.quality >= 0.5)
        assert step.decision.confidence is not None
        assert step.oracle >= step.expected - 1e-12
    assert all(result.quality[s] == plan.quality[s, result.chosen[s]] for s in range(80))


def test_strategies_side_by_side_on_the_same_plans() -> None:
    log = synthetic_log(tasks=120)
    report = replay(log, ["thompson", "confidence_weighted", "random"], runs=3, seed=0)
    assert list(report.summaries) == ["thompson", "confidence_weighted", "random"]
    plans = {label: [r.plan.index for r in results] for label, results in report.results.items()}
    assert plans["thompson"] == plans["random"] == [0, 1, 2]
    thompson, random = report.summaries["thompson"], report.summaries["random"]
    assert thompson.pct_oracle["mean"] > random.pct_oracle["mean"] + 10
    assert thompson.final_regret["mean"] < random.final_regret["mean"]
    assert thompson.choice_share(1)[0][0] in {"b", "c"}
    data = report.as_dict(curve_points=10)
    assert len(data["strategies"]) == 3
    assert len(data["strategies"][0]["regret_curve"]["step"]) == 10
    assert data["settings"]["log"]["agents"] == 4


def test_the_same_replay_in_worker_processes_gives_the_same_choices() -> None:
    log = synthetic_log(tasks=40)
    here = replay(log, ["thompson", "random"], runs=2, seed=4)
    there = replay(log, ["thompson", "random"], runs=2, seed=4, jobs=2)
    for label in ("thompson", "random"):
        for a, b in zip(here.results[label], there.results[label], strict=True):
            assert np.array_equal(a.chosen, b.chosen)


def test_labelled_variants_and_bad_requests() -> None:
    log = synthetic_log(tasks=20)
    report = replay(log, [("plain", "thompson", {"pooling": False}), "thompson"], runs=1)
    assert list(report.summaries) == ["plain", "thompson"]
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        replay(log, ["nope"], runs=1)
    with pytest.raises(ValueError, match="labels must be distinct"):
        replay(log, ["random", "random"], runs=1)
    with pytest.raises(ValueError, match="half_life_executions"):
        replay(log, ["thompson"], runs=1, strategy_params={"thompson": {
            "half_life_executions": 0}})
    with pytest.raises(ValueError, match="jobs=1"):
        replay(log, ["random"], runs=1, jobs=2, observer=lambda step: None)
    with pytest.raises(ValueError, match=r"strategy_params names 'thompsn', which is not "
                                         r"among the replayed strategies \(thompson\)"):
        replay(log, ["thompson"], runs=1, strategy_params={"thompsn": {"pooling": False}})
    with pytest.raises(ValueError, match="jobs must be a whole number >= 1, got -3"):
        replay(log, ["random"], runs=1, jobs=-3)
    with pytest.raises(TypeError, match="strategies must be a list, not the string 'random'"):
        replay(log, "random", runs=1)  # type: ignore[arg-type]


def counting_factory(routers: list[AgentRouter], feedback: Feedback | None = None
                     ) -> Callable[[StrategySpec], RouterFactory]:
    """Router factories that keep every router they build, to read what it learned."""
    def for_spec(spec: StrategySpec) -> RouterFactory:
        build = strategy_router(spec.name, spec.params, feedback)

        def factory(plan: RunPlan) -> AgentRouter:
            routers.append(build(plan))
            return routers[-1]
        return factory
    return for_spec


def test_late_partial_feedback_goes_through_router_feedback() -> None:
    log = synthetic_log(tasks=200)
    plans = make_plans(log, runs=1, seed=3)
    judged = Feedback(0.25, 0).judged(plans[0])
    assert 30 < judged.sum() < 70  # about a quarter, the same draws for every strategy
    assert np.array_equal(judged, Feedback(0.25, 50).judged(plans[0]))
    for rate, delay in ((1.0, 0), (0.25, 0), (0.25, 50), (0.0, 0)):
        routers: list[AgentRouter] = []
        feedback = Feedback(rate, delay)
        report = replay(log, ["knowledge_gradient"], runs=1, seed=3, feedback_rate=rate,
                        feedback_delay=delay,
                        router_factory=counting_factory(routers, feedback))
        result = report.results["knowledge_gradient"][0]
        assert (result.chosen >= 0).sum() == 200  # every task is still routed and scored
        profiles = routers[0].profiles()
        # every execution is recorded when it is decided; those not judged (or whose
        # verdict is not due yet) await one, and only verdicts became quality evidence
        assert sum(p.executions_total for p in profiles) == 200
        due = np.flatnonzero(feedback.judged(plans[0])[:200 - delay])
        assert sum(p.pending for p in profiles) == (0 if feedback.immediate else 200 - len(due))
        learned = sum(p.avg_quality * (p.executions_total - p.pending) for p in profiles
                      if p.avg_quality is not None)  # None: every run of the pair pending
        assert learned == pytest.approx(float(result.quality[due].sum()))
        assert report.settings["feedback_rate"] == rate
        assert report.settings["feedback_delay"] == delay


def test_late_feedback_needs_a_router_that_waits_for_verdicts() -> None:
    with pytest.raises(ValueError, match="wait_s > 0"):
        replay(synthetic_log(tasks=20), ["random"], runs=1, feedback_rate=0.5,
               router_factory=counting_factory([]))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"feedback_rate": 1.5}, "feedback_rate must be in"),
    ({"feedback_rate": float("nan")}, "feedback_rate must be in"),
    ({"feedback_delay": -1}, "feedback_delay must be"),
])
def test_bad_feedback_settings(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        replay(synthetic_log(), ["random"], runs=1, **kwargs)  # type: ignore[arg-type]


def test_summaries_hold_python_numbers_never_numpy_scalars() -> None:
    report = replay(synthetic_log(tasks=20), ["random"], runs=3, agents=3)
    summary = report.summaries["random"]

    def numbers(value: object) -> list[object]:
        if isinstance(value, dict):
            return [n for v in value.values() for n in numbers(v)]
        if isinstance(value, list | tuple):
            return [n for v in value for n in numbers(v)]
        return [value] if isinstance(value, float | int) and not isinstance(value, bool) \
            else []

    spreads = [summary.pct_oracle, summary.mean_quality, summary.final_regret,
               summary.oracle_share]
    found = numbers([spreads, summary.as_dict(), summary.choice_share()])
    assert found and {type(n) for n in found} <= {float, int}, {type(n) for n in found}

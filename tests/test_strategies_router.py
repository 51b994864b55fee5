"""The learning strategies through the public API: AgentRouter on real embedded stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from trustroute.profiles.records import ExecutionRecord
from trustroute.router import AgentRouter
from trustroute.router.config import ConfigError
from trustroute.router.strategies import (
    DEFAULT_STRATEGY,
    InvalidStrategyParams,
    available_strategies,
    make_strategy,
)


def history(agent: str, task_type: str, qualities: list[float], *, cost: float | None = None,
            latency_ms: float = 0.0) -> list[ExecutionRecord]:
    return [ExecutionRecord(agent_id=agent, task_type=task_type, success=q >= 0.5,
                            quality=q, cost=cost, latency_ms=latency_ms) for q in qualities]


def lucky_streak(r: AgentRouter, lucky: float = 1.0) -> None:
    """The reference case: a newcomer with 1 perfect run, an agent with 10 runs at 0.80."""
    r.record_many(history("new", "code", [lucky]) + history("old", "code", [0.8] * 10))


def test_knowledge_gradient_is_the_default() -> None:
    assert DEFAULT_STRATEGY == "knowledge_gradient"
    assert {"knowledge_gradient", "thompson", "lower_bound", "random", "confidence_weighted",
            "epsilon_greedy"} <= set(available_strategies())
    with AgentRouter(agents=["a"], store="mem://") as r:
        assert r.strategy.name == "knowledge_gradient"
        assert r.select("x").strategy == "knowledge_gradient"


@pytest.mark.parametrize("lucky", [1.0, 0.95])
def test_lucky_streak_loses_in_exploit_only_mode(lucky: float) -> None:
    for seed in range(3):
        with AgentRouter(agents=["new", "old"], store="mem://", seed=seed,
                         exploit_only=True) as r:
            lucky_streak(r, lucky)
            decisions = [r.select("code") for _ in range(20)]
            assert {d.agent_id for d in decisions} == {"old"}
            d = decisions[0]
            bounds = {c.agent_id: c.components["lower_bound"] for c in d.candidates}
            assert bounds["old"] > bounds["new"]
            assert "lower bound" in d.chosen.reason


def test_exploit_only_as_a_strategy_parameter_and_as_lower_bound() -> None:
    for kwargs in ({"strategy": "thompson", "strategy_params": {"exploit_only": True}},
                   {"strategy": "lower_bound"}):
        with AgentRouter(agents=["new", "old"], store="mem://", seed=1, **kwargs) as r:
            lucky_streak(r)
            assert {r.select("code").agent_id for _ in range(20)} == {"old"}


@pytest.mark.parametrize("strategy", ["thompson", "knowledge_gradient"])
def test_the_newcomer_is_still_explored_outside_exploit_only_mode(strategy: str) -> None:
    with AgentRouter(agents=["new", "old"], store="mem://", seed=0, strategy=strategy) as r:
        lucky_streak(r)
        chosen = []
        for i in range(60):  # the newcomer turns out mediocre (0.5), "old" stays at 0.8
            d = r.select("code")
            r.record(d, success=True, quality=(0.8 if d.agent_id == "old" else i % 2))
            chosen.append(d.agent_id)
    assert "new" in chosen[:10]  # tried early
    assert chosen[-20:].count("new") < 10  # and left once it shows what it is


def test_exploration_floor_routes_a_fraction_at_random() -> None:
    with AgentRouter(agents=["new", "old"], store="mem://", seed=3, strategy="lower_bound",
                     strategy_params={"exploration_floor": 0.5}) as r:
        lucky_streak(r)
        decisions = [r.select("code") for _ in range(300)]
    share = sum(d.agent_id == "new" for d in decisions) / len(decisions)
    assert 0.15 <= share <= 0.35  # half the decisions are random, half of those pick "new"
    assert any("exploration floor" in d.chosen.reason for d in decisions)


def test_each_decision_explains_itself() -> None:
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0, strategy="thompson") as r:
        r.record_many(history("a", "code", [1.0, 0.0, 1.0, 1.0]) + history("b", "chat", [0.5]))
        d = r.select("code")
    for c in d.candidates:
        for key in ("posterior_mean", "posterior_sd", "sample", "prior_mean", "prior_strength",
                    "evidence", "success_probability", "lower_bound"):
            assert key in c.components, key
        comps = c.components
        assert c.reason == (f"Thompson draw {comps['sample']:.2f}; mean "
                            f"{comps['posterior_mean']:.2f} ± {comps['posterior_sd']:.2f} over "
                            f"{comps['evidence']:.1f} effective runs (pooled prior "
                            f"{comps['prior_mean']:.2f} x {comps['prior_strength']:.1f})")
        assert c.score == comps["sample"] == comps["objective"]
    a = next(c for c in d.candidates if c.agent_id == "a")
    # four runs, aged by the task type's clock (half-life 100 executions)
    assert a.components["evidence"] == pytest.approx(sum(2 ** (-k / 100) for k in range(4)))
    assert 0.0 < a.components["posterior_sd"] < 0.3
    assert d.confidence == pytest.approx(d.chosen.components["success_probability"])


def test_a_knowledge_gradient_decision_explains_its_index() -> None:
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0) as r:
        r.record_many(history("a", "code", [1.0, 0.0, 1.0, 1.0]) + history("b", "chat", [0.5]))
        d = r.select("code")
    for c in d.candidates:
        comps = c.components
        assert comps["index"] >= comps["posterior_mean"]  # mean + budget x gain >= mean
        assert c.score == comps["index"] == comps["objective"]
        assert c.reason.startswith(f"index (budget 144 outcomes) {comps['index']:.2f}; mean "
                                   f"{comps['posterior_mean']:.2f}")


def test_success_probability_is_about_success_not_quality() -> None:
    with AgentRouter(agents=["a"], store="mem://", seed=0) as r:
        r.record_many([ExecutionRecord(agent_id="a", task_type="t", success=False, quality=0.6)
                       for _ in range(30)])
        d = r.select("t")
    assert d.chosen.components["posterior_mean"] == pytest.approx(0.6, abs=0.05)
    assert d.chosen.components["success_probability"] < 0.15
    assert d.confidence is not None and d.confidence < 0.15


def test_decisions_are_reproducible_under_a_seed() -> None:
    def run(seed: int) -> list[str]:
        quality = {"a": 0.2, "b": 0.9, "c": 0.6}
        with AgentRouter(agents=list(quality), store="mem://", seed=seed) as r:
            chosen = []
            for i in range(25):
                d = r.select("code" if i % 2 else "chat")
                r.record(d, success=quality[d.agent_id] >= 0.5, quality=quality[d.agent_id])
                chosen.append(d.agent_id)
        return chosen

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_cost_and_latency_enter_the_objective() -> None:
    agents = [{"id": "pricey", "cost_per_call": 1.0}, {"id": "cheap", "cost_per_call": 0.1}]
    with AgentRouter(agents=agents, store="mem://", seed=0, exploit_only=True,
                     strategy_params={"lambda_cost": 0.5}) as r:
        r.record_many(history("pricey", "t", [0.85] * 20) + history("cheap", "t", [0.8] * 20))
        d = r.select("t")
    assert d.agent_id == "cheap"
    pricey = next(c for c in d.candidates if c.agent_id == "pricey")
    assert pricey.components["penalty"] == pytest.approx(0.5)
    assert pricey.reason.startswith("lower bound ")
    assert pricey.reason.endswith("; cost/latency penalty 0.500")
    assert pricey.score == pytest.approx(pricey.components["lower_bound"] - 0.5)
    with AgentRouter(agents=agents, store="mem://", seed=0, exploit_only=True) as r:
        r.record_many(history("pricey", "t", [0.85] * 20) + history("cheap", "t", [0.8] * 20))
        assert r.select("t").agent_id == "pricey"
    with AgentRouter(agents=["slow", "fast"], store="mem://", seed=0, exploit_only=True,
                     strategy_params={"lambda_latency": 0.1}) as r:
        r.record_many(history("slow", "t", [0.85] * 20, latency_ms=3000.0)
                      + history("fast", "t", [0.8] * 20, latency_ms=100.0))
        d = r.select("t")
    assert d.agent_id == "fast"
    slow = next(c for c in d.candidates if c.agent_id == "slow")
    assert slow.components["penalty"] == pytest.approx(0.3)


def test_recorded_costs_are_used_when_the_config_has_none() -> None:
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0, exploit_only=True,
                     strategy_params={"lambda_cost": 1.0}) as r:
        r.record_many(history("a", "t", [0.9] * 20, cost=0.5)
                      + history("b", "t", [0.8] * 20, cost=0.01))
        d = r.select("t")
    assert d.agent_id == "b"
    penalties = {c.agent_id: c.components["penalty"] for c in d.candidates}
    assert penalties == pytest.approx({"a": 0.5, "b": 0.01})


@pytest.mark.parametrize(("params", "needle"), [
    ({"half_life_executions": -5}, "half_life_executions"),
    ({"prior_strenght": 3}, "unknown parameter 'prior_strenght'"),
    ({"exploration_floor": 0.9}, "exploration_floor"),
    ({"lambda_cost": "a lot"}, "lambda_cost"),
    ({"feedback_rate": 0}, "feedback_rate"),
    ({"horizon_executions": -1}, "horizon_executions"),
])
def test_bad_parameters_are_clear_errors(params: dict[str, object], needle: str) -> None:
    with pytest.raises(InvalidStrategyParams, match=f"strategy '{DEFAULT_STRATEGY}'") as info:
        AgentRouter(agents=["a"], store="mem://", strategy_params=params)
    assert needle in str(info.value)


def test_strategy_and_params_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "router.yaml"
    config.write_text("store: mem://\nagents: [a, b]\nstrategy:\n  name: thompson\n"
                      "  params:\n    half_life_executions: 50\n    lambda_cost: 0.2\n")
    with AgentRouter.from_config(config) as r:
        assert r.strategy.name == "thompson"
        assert r.strategy.params.half_life_executions == 50  # type: ignore[attr-defined]
        assert r.strategy.params.lambda_cost == 0.2  # type: ignore[attr-defined]
    config.write_text("store: mem://\nagents: [a]\nstrategy:\n  name: thompson\n"
                      "  params:\n    half_life: 50\n")
    with pytest.raises((InvalidStrategyParams, ConfigError), match="unknown parameter 'half_life'"):
        AgentRouter.from_config(config)


def test_learned_state_survives_close_and_reopen(kv_url: str) -> None:
    def posterior(r: AgentRouter) -> dict[str, tuple[float, float, float]]:
        d = r.select("code")
        return {c.agent_id: (c.components["posterior_mean"], c.components["prior_mean"],
                             c.components["evidence"]) for c in d.candidates}

    with AgentRouter(agents=["a", "b", "c"], store=kv_url, seed=0) as r:
        for i in range(30):
            d = r.select("code" if i % 3 else "chat")
            r.record(d, success=d.agent_id != "c", quality=0.9 if d.agent_id == "a" else 0.4)
        before = posterior(r)
    with AgentRouter(agents=["a", "b", "c"], store=kv_url, seed=0) as r:
        after = posterior(r)
    # the pairs' evidence is rebuilt exactly from the stored windows; the type baselines
    # are refreshed all at once on load (incrementally, one record at a time, before)
    for agent, (mean, prior, evidence) in before.items():
        assert after[agent][2] == pytest.approx(evidence, abs=1e-9)
        assert after[agent][0] == pytest.approx(mean, abs=0.005)
        assert after[agent][1] == pytest.approx(prior, abs=0.02)


def collapsing_stream(count: int, collapse_at: int) -> list[ExecutionRecord]:
    """Three agents on two task types; ``a2`` goes from the best to the worst at
    ``collapse_at`` (a change the change monitor catches)."""
    rng = np.random.default_rng(9)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    means = {"a0": 0.6, "a1": 0.4, "a2": 0.9}
    out = []
    for i in range(count):
        agent = f"a{int(rng.integers(3))}"
        mean = 0.05 if agent == "a2" and i >= collapse_at else means[agent]
        quality = float(np.clip(rng.normal(mean, 0.15), 0.0, 1.0))
        out.append(ExecutionRecord(agent_id=agent, task_type=f"t{int(rng.integers(2))}",
                                   success=quality >= 0.5, quality=quality,
                                   latency_ms=float(rng.uniform(10, 500)),
                                   cost=None if i % 3 else 0.01,
                                   timestamp=start + timedelta(minutes=i)))
    return out


@pytest.mark.parametrize("strategy", ["thompson", "lower_bound"])
def test_a_bulk_import_learns_what_recording_one_by_one_does(strategy: str) -> None:
    # record_many hands the strategy each record once the book holds the whole batch;
    # it must learn exactly what it learns record by record, the collapse of a2 in the
    # middle of the first batch included
    records = collapsing_stream(600, collapse_at=200)
    agents = ["a0", "a1", "a2"]
    params = {"lambda_cost": 1.0, "lambda_latency": 0.1}
    with AgentRouter(agents=agents, store="mem://", seed=0, strategy=strategy,
                     strategy_params=params) as bulk, \
            AgentRouter(agents=agents, store="mem://", seed=0, strategy=strategy,
                        strategy_params=params) as single:
        assert bulk.record_many(records, batch_size=450) == 600
        for rec in records:
            single.record(rec)
        for task_type in ("t0", "t1"):
            a, b = bulk.select(task_type), single.select(task_type)
            assert [c.agent_id for c in a.candidates] == [c.agent_id for c in b.candidates]
            for x, y in zip(a.candidates, b.candidates, strict=True):
                assert dict(x.components) == pytest.approx(dict(y.components), rel=1e-9)
            # a2's evidence is what it did after the collapse: poor on every task type
            a2 = next(c for c in a.candidates if c.agent_id == "a2")
            assert a2.components["posterior_mean"] < 0.3


@pytest.mark.parametrize("params", [{}, {"half_life_days": 1.0}])
def test_a_posterior_kept_between_decisions_equals_one_computed_afresh(
        params: dict[str, float]) -> None:
    # one router decides before every record (its posteriors are updated incrementally,
    # the other task type's share kept while only one type's evidence changes); the
    # other decides only at the end: both must say the same
    records = collapsing_stream(300, collapse_at=150)
    agents = ["a0", "a1", "a2"]
    with AgentRouter(agents=agents, store="mem://", seed=0, strategy_params=params) as busy, \
            AgentRouter(agents=agents, store="mem://", seed=0,
                        strategy_params=params) as fresh:
        for rec in records:
            busy.select(rec.task_type)
            busy.record(rec)
        fresh.record_many(records)
        for task_type in ("t0", "t1", "unseen"):
            a, b = busy.select(task_type), fresh.select(task_type)
            x = {c.agent_id: dict(c.components) for c in a.candidates}
            y = {c.agent_id: dict(c.components) for c in b.candidates}
            for agent in agents:
                for name in ("posterior_mean", "posterior_sd", "prior_mean",
                             "prior_strength", "evidence", "success_probability"):
                    assert x[agent][name] == pytest.approx(y[agent][name], rel=1e-6), name


@pytest.mark.parametrize("name", ["knowledge_gradient", "thompson", "lower_bound"])
def test_a_posterior_prepared_when_a_record_is_folded_decides_as_one_computed_in_select(
        name: str) -> None:
    """``Strategy.prepare`` (optional) brings the posterior up to date when a record is
    folded; a strategy without it computes the same posterior in the next ``select``.
    The two make the same decisions with the same scores, through exclusions (other
    arm sets) and several task types."""
    base = type(make_strategy(name))
    unprepared = type("Unprepared", (base,), {"prepare": None})
    agents = [f"a{i}" for i in range(6)]
    runs: list[list[tuple[str, list[float]]]] = []
    for strategy in (make_strategy(name), unprepared()):
        rng = np.random.default_rng(5)
        seen = []
        with AgentRouter(agents=agents, store="mem://", seed=3, strategy=strategy) as r:
            for i in range(120):
                task_type = ("code", "chat")[i % 3 == 0]
                exclude = [agents[i % 6]] if i % 4 == 0 else []
                decision = r.select(task_type, exclude=exclude)
                seen.append((decision.agent_id, [c.score for c in decision.candidates]))
                good = int(decision.agent_id[1:]) / 6
                r.record(decision, success=True, quality=float(rng.uniform() < good))
        runs.append(seen)
    assert runs[0] == runs[1]

"""The default ``knowledge_gradient`` strategy: exploration bounded by the evidence to come.

Driven through the strategy interface on synthetic Bernoulli agents (see
``test_strategies_learning.bandit``); the router integration is in
test_strategies_router.py and the side-by-side figures in ``make bench``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_strategies_learning import NOW, bandit

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileSettings, empty_profile
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.agents import AgentSpec
from trustroute.router.strategies import Arm, StrategyContext, make_strategy
from trustroute.router.strategies.knowledge_gradient import KnowledgeGradient, knowledge_gradient


def leaderboard(seed: int, agents: int) -> np.ndarray:
    """Agent means like a leaderboard's: a few strong, most weak."""
    return np.random.default_rng(seed).beta(0.7, 2.5, size=agents)


def test_the_gain_is_zero_where_one_outcome_cannot_change_the_best() -> None:
    alpha, beta = np.array([60.0, 1.0, 2.0]), np.array([40.0, 1.0, 30.0])
    gain = knowledge_gradient(alpha, beta)
    assert gain[1] > 0.0  # an untried arm: one success could make it the best
    assert gain[2] == 0.0  # a known poor arm: nothing one outcome can change
    assert gain[0] == pytest.approx(0.0, abs=1e-12)  # one failure leaves the best the best
    assert knowledge_gradient(np.array([3.0]), np.array([2.0])).tolist() == [0.0]


def test_with_many_agents_and_few_tasks_it_stops_paying_for_agents_it_cannot_learn() -> None:
    ours, thompson = [], []
    for seed in range(4):
        means = leaderboard(seed, 40)
        for name, out in (("knowledge_gradient", ours), ("thompson", thompson)):
            chosen = bandit(lambda i, t, s, m=means: m[i], 40, ["t"], 150, seed, name, ties=True)
            out.append(float(means[chosen].mean() / means.max()))
    assert np.mean(ours) > np.mean(thompson) + 0.05, (ours, thompson)


def test_the_budget_is_the_evidence_still_to_come() -> None:
    memory = 100 / math.log(2)  # a lesson serves the mean life of a discounted outcome
    s = make_strategy("knowledge_gradient")
    assert isinstance(s, KnowledgeGradient)
    assert s.budget("t") == pytest.approx(memory)
    assert make_strategy("knowledge_gradient", feedback_rate=0.1).budget("t") == \
        pytest.approx(0.1 * memory)
    short = make_strategy("knowledge_gradient", horizon_executions=50)
    assert isinstance(short, KnowledgeGradient)
    assert short.budget("t") == pytest.approx(50)
    # with only some outcomes judged, the judged share is estimated per task type
    book = ProfileBook()
    spec = AgentSpec(id="a")
    ctx = StrategyContext("t", NOW, book, ProfileSettings(), np.random.default_rng(0))
    for k in range(100):
        s.score([Arm(spec, None, empty_profile("a", "t"))], ctx)
        if k % 10 == 0:
            rec = ExecutionRecord(agent_id="a", task_type="t", success=True, quality=1.0,
                                  timestamp=NOW)
            book.apply(rec)
            s.observe(rec, book.clock("t"), book)
    assert s.budget("t") == pytest.approx(11 / 101 * memory)
    assert s.budget("other") == pytest.approx(memory)  # nothing decided there yet


def test_with_sparse_labels_it_exploits_what_little_it_has() -> None:
    # one outcome in ten judged: Thompson sampling keeps exploring on evidence that
    # will never come; the budget-aware index turns greedy
    ours, thompson = [], []
    for seed in range(4):
        means = leaderboard(seed + 10, 12)
        for name, out in (("knowledge_gradient", ours), ("thompson", thompson)):
            chosen = bandit(lambda i, t, s, m=means: m[i], 12, ["t", "u"], 400, seed, name,
                            ties=True, judged=0.1)
            out.append(float(means[chosen].mean() / means.max()))
    assert np.mean(ours) > np.mean(thompson), (ours, thompson)


@pytest.mark.parametrize("seed", range(4))
def test_traffic_to_a_regressed_agent_halves_within_30_tasks(seed: int) -> None:
    mus, at = [0.9, 0.55, 0.45, 0.35], 200

    def means(i: int, task_type: str, step: int) -> float:
        return 0.15 if i == 0 and step >= at else mus[i]

    chosen = np.array(bandit(means, 4, ["t"], 320, seed, "knowledge_gradient", ties=True)) == 0
    before = chosen[at - 30:at].mean()
    rolling = np.convolve(chosen[at:], np.ones(10) / 10, mode="valid")
    halved = int(np.flatnonzero(rolling <= before / 2)[0]) + 10
    assert before > 0.6 and halved <= 30, (before, halved)


def test_epsilon_greedy_is_greedy_but_for_epsilon() -> None:
    chosen = bandit(lambda i, t, s: [0.2, 0.8, 0.4][i], 3, ["t"], 600, 0, "epsilon_greedy",
                    ties=True, epsilon=0.2)
    share = np.bincount(chosen[100:], minlength=3) / 500
    assert share[1] == pytest.approx(0.8 + 0.2 / 3, abs=0.06)
    assert share[0] == pytest.approx(0.2 / 3, abs=0.04)


def test_late_verdicts_count_as_judged_outcomes_in_the_budget() -> None:
    # with wait_s > 0 a run is pending at record time; its verdict arrives through
    # feedback (Strategy.amend). The budget counts it as judged: every run here is
    # judged, so the budget stays 144 x (judged + 1) / (decisions + 1) = 144 x 21 / 22,
    # not 144 / 22 as when late verdicts were not counted.
    from trustroute import AgentRouter

    with AgentRouter(agents=["a", "b"], store="mem://", seed=0,
                     feedback={"wait_s": 3600, "default": "ignore"}) as r:
        for i in range(20):
            d = r.select("t")
            r.record(d, success=True)  # pending: no quality yet
            r.feedback(d.decision_id, approved=i % 3 != 0)
        d = r.select("t")
        assert d.chosen.reason.startswith("index (budget 138 outcomes)"), d.chosen.reason
        for _ in range(20):  # runs that are never judged do lower it
            r.record(r.select("t"), success=True)
        d = r.select("t")
        assert d.chosen.reason.startswith("index (budget 70 outcomes)"), d.chosen.reason


def test_runs_awaiting_verdicts_count_as_outcomes_on_their_way() -> None:
    # a leader (75% good) and a weak agent known from 30 judged runs each, and a
    # newcomer worth trying; verdicts now come late. Every run sent to the newcomer is
    # an outcome on its way, so a stream of decisions waiting for verdicts tries it a
    # few times and goes back to the leader, instead of sending it every task until a
    # verdict arrives (GP-BUCB's hallucinated observations).
    from trustroute import AgentRouter

    def picks(record: bool) -> list[str]:
        with AgentRouter(agents=["leader", "weak", "newcomer"], store="mem://", seed=0,
                         feedback={"wait_s": 3600, "default": "ignore"}) as r:
            for i in range(30):
                r.record(agent_id="leader", task_type="t", success=True,
                         quality=0.0 if i % 4 == 0 else 1.0)
                r.record(agent_id="weak", task_type="t", success=True,
                         quality=1.0 if i % 3 == 0 else 0.0)
            chosen = []
            for _ in range(40):
                d = r.select("t")
                chosen.append(d.agent_id)
                if record:
                    r.record(d, success=True)  # no quality: awaiting a verdict
            assert r.profile("newcomer", "t").pending == chosen.count("newcomer") * record
            return chosen

    waiting = picks(record=True)
    assert waiting[0] == "newcomer"  # worth trying
    assert 1 < waiting.count("newcomer") <= 5
    assert waiting[-30:] == ["leader"] * 30
    # with no run in flight (decisions not recorded), nothing changes between picks
    assert picks(record=False) == ["newcomer"] * 40


def test_runs_awaiting_verdicts_on_other_task_types_shorten_the_lessons_reach() -> None:
    # what a newcomer's first outcome on "t" teaches reaches its other task types as
    # far as its prior rests there; its runs awaiting verdicts on "u" will soon pin it
    # down there, so trying it on "t" is worth less the more of them are on their way
    from trustroute import AgentRouter

    def newcomers_index(waiting_on_u: int) -> float:
        with AgentRouter(agents=["leader", "newcomer"], store="mem://", seed=0,
                         feedback={"wait_s": 3600, "default": "ignore"}) as r:
            for i in range(30):
                for task_type in ("t", "u"):
                    r.record(agent_id="leader", task_type=task_type, success=True,
                             quality=0.0 if i % 4 == 0 else 1.0)
            r.record(agent_id="newcomer", task_type="u", success=True, quality=1.0)
            r.record(agent_id="leader", task_type="t", success=True)  # on its way on "t"
            for _ in range(waiting_on_u):
                r.record(agent_id="newcomer", task_type="u", success=True)
            assert r.book.pending_on("u").get("newcomer", 0) == waiting_on_u
            scores = {c.agent_id: c.score for c in r.select("t").candidates}
            return scores["newcomer"]

    assert newcomers_index(0) > newcomers_index(5) > newcomers_index(20)


def test_a_decision_reads_the_runs_awaiting_verdicts_as_they_are_now() -> None:
    # the strategy keeps each task type's counts aligned with the candidates between
    # decisions and reads a type again only when the book says its counts changed:
    # after more runs go out on "u", the index on "t" is what a decision that kept
    # nothing (the candidates changed in between) computes
    from trustroute import AgentRouter

    def second_index(first_exclude: list[str]) -> float:
        with AgentRouter(agents=["leader", "newcomer", "other"], store="mem://", seed=0,
                         feedback={"wait_s": 3600, "default": "ignore"}) as r:
            for i in range(30):
                for task_type in ("t", "u"):
                    r.record(agent_id="leader", task_type=task_type, success=True,
                             quality=0.0 if i % 4 == 0 else 1.0)
                    r.record(agent_id="other", task_type=task_type, success=True,
                             quality=float(i % 2))
            r.record(agent_id="newcomer", task_type="u", success=True, quality=1.0)
            r.record(agent_id="leader", task_type="t", success=True)  # on its way
            r.record(agent_id="newcomer", task_type="u", success=True)
            r.select("t", exclude=first_exclude)
            for _ in range(5):
                r.record(agent_id="newcomer", task_type="u", success=True)
            return {c.agent_id: c.score for c in r.select("t").candidates}["newcomer"]

    assert second_index([]) == pytest.approx(second_index(["other"]), rel=1e-12)


def test_looking_ahead_values_an_arm_one_outcome_cannot_lift() -> None:
    from trustroute.router.strategies.knowledge_gradient import knowledge_gradient_m

    # an untried agent whose pooled prior (0.52 x 2.5 runs) sits below a known leader
    # (0.69 x 61.5): no single outcome lifts it past, a dozen could
    alpha, beta = np.array([1.3, 42.4, 0.1]), np.array([1.2, 19.1, 30.0])
    assert knowledge_gradient(alpha, beta)[0] == 0.0
    ahead = knowledge_gradient_m(alpha, beta, 12)
    assert ahead[0] > 1e-3  # worth 144 x 0.003 = 0.4 of quality in the index
    assert ahead[2] == 0.0  # twelve good outcomes still leave it below the leader
    assert knowledge_gradient_m(alpha, beta, 1) == pytest.approx(knowledge_gradient(alpha, beta))


@pytest.mark.parametrize("m", [1, 2, 12, 40])
def test_looking_ahead_is_the_exact_beta_binomial_expectation(m: int) -> None:
    from scipy.stats import betabinom

    from trustroute.router.strategies.knowledge_gradient import knowledge_gradient_m

    alpha = np.array([1.3, 42.4, 0.1, 3.0, 250.5])
    beta = np.array([1.2, 19.1, 30.0, 2.0, 90.25])
    mean = alpha / (alpha + beta)
    expected = []
    for i in range(len(alpha)):
        other = max(np.delete(mean, i))
        k = np.arange(m + 1)
        then = np.maximum((alpha[i] + k) / (alpha[i] + beta[i] + m), other)
        value = float(np.dot(betabinom.pmf(k, m, alpha[i], beta[i]), then))
        expected.append(max(value - max(mean[i], other), 0.0) / m)
    assert knowledge_gradient_m(alpha, beta, m) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_demo_finds_each_task_types_specialist(seed: int) -> None:
    # `trustroute demo`: a generalist (0.7 everywhere) and specialists (0.9 on their
    # type). With a one-step look-ahead the generalist's lead starved them: at seed 1
    # no specialist got a single task of its type.
    from trustroute import AgentRouter
    from trustroute.router.demo.runner import run_demo
    from trustroute.router.demo.workload import DEFAULT_WORKLOAD as world

    with AgentRouter(agents=world.agent_specs(), store="mem://", seed=seed) as r:
        run = run_demo(r, world, tasks=400, seed=seed)
    for task_type in world.task_types:
        best = max(world.agents, key=lambda a: a.skill[task_type]).id
        chosen = [x.agent_id for x in run.results if x.task_type == task_type]
        assert chosen.count(best) >= len(chosen) / 3, (task_type, best, chosen.count(best))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("component", ["uniform", "population"])
def test_a_robust_prior_ranks_a_short_good_record_above_a_dropped_agent(
        seed: int, component: str) -> None:
    # `trustroute demo`: each type's baseline is its specialist's level, so on code the
    # writer's pooled prior sits near the coder's 0.9. Tried there a few times and
    # dropped (true level 0.4), it drifted back toward that prior and the lower bound put
    # it above the generalist (0.7, a short good record). With a robust mixture prior its
    # own runs overrule the pooled prior they conflict with.
    from trustroute import AgentRouter
    from trustroute.router.demo.runner import run_demo
    from trustroute.router.demo.workload import DEFAULT_WORKLOAD as world

    with AgentRouter(agents=world.agent_specs(), store="mem://", seed=seed,
                     strategy_params={"robust_weight": 0.8,
                                      "robust_component": component}) as r:
        run = run_demo(r, world, tasks=400, seed=seed)
        tried = {x.agent_id for x in run.results if x.task_type == "code"}
        assert {"writer", "generalist"} <= tried
        r.exploit_only = True
        ranked = [c.agent_id for c in r.select("code", exclude=["coder"]).candidates]
    assert ranked.index("generalist") < ranked.index("writer"), ranked

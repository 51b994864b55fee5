"""Feedback reaches learning (issue 20): late verdicts set an execution's quality in its
profile window, the strategy's evidence and the trust counts; pending runs; bad input."""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from pathlib import Path

import pytest

from trustroute import AgentRouter
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router.errors import UnknownAgent, UnknownDecision
from trustroute.router.feedback import FeedbackPolicy


def thumbs_run(seed: int) -> tuple[int, float, float]:
    """400 tasks, two agents that never raise, users approve one 90% and the other 20%
    of the time: (the liked agent's tasks in the second half, liked's and disliked's
    human scores)."""
    users = random.Random(1000 + seed)
    rate = {"liked": 0.9, "disliked": 0.2}
    second_half = 0
    with AgentRouter(agents=list(rate), store="mem://", seed=seed,
                     feedback={"wait_s": 3600, "default": "ignore"}) as r:
        for i in range(400):
            d = r.select("chat")
            r.record(d, success=True)  # no quality: pending until a verdict comes
            r.feedback(d.decision_id, approved=users.random() < rate[d.agent_id])
            second_half += i >= 200 and d.agent_id == "liked"
        profile = r.profile("liked", "chat")
        assert profile.pending == 0 and 0.8 <= profile.avg_quality <= 0.97
        assert r.profile("disliked", "chat").expertise < 0.5
        liked, disliked = (r.trust(a, "chat").human for a in rate)
    return second_half, liked, disliked


def test_users_thumbs_teach_the_router_which_agent_they_like() -> None:
    """Five runs. The disliked agent is given only the few tasks that show it is worse
    (2 to 15), so its score is what a few verdicts say (docs/trust.md)."""
    for second_half, liked, disliked in (thumbs_run(seed) for seed in range(5)):
        assert second_half >= 0.85 * 200
        assert liked >= 0.8
        assert disliked <= 0.3


def test_the_human_score_reflects_the_approval_rate_in_any_order() -> None:
    """200 verdicts on each agent's executions, 90% and 20% approved, shuffled."""
    users = random.Random(11)
    with AgentRouter(agents=["liked", "disliked"], store="mem://", seed=0) as r:
        verdicts = []
        for agent, approved in (("liked", 180), ("disliked", 40)):
            for n in range(200):
                rec = r.record(agent_id=agent, task_type="chat", success=True)
                verdicts.append((rec.record_id, n < approved))
        users.shuffle(verdicts)
        for ref, approved in verdicts:
            r.feedback(ref, approved=approved)
        assert r.trust("liked", "chat").human >= 0.8
        assert r.trust("disliked", "chat").human <= 0.3
        assert r.profile("liked", "chat").avg_quality == pytest.approx(0.9)
        assert r.profile("disliked", "chat").avg_quality == pytest.approx(0.2)


def test_a_verdict_sets_the_quality_and_the_later_verdict_on_a_key_stands(
        router: AgentRouter) -> None:
    d = router.select("code")
    rec = router.record(d, success=True, quality=0.9)
    assert router.profile(d.agent_id, "code").avg_quality == pytest.approx(0.9)
    router.feedback(rec.record_id, approved=False)
    p = router.profile(d.agent_id, "code")
    assert p.avg_quality == 0.0 and p.expertise == 0.0 and p.executions_total == 1
    counts = router.trust_layer.book.counts(d.agent_id, "code")
    assert (counts.positive, counts.negative, counts.neutral) == (0, 0, 1)
    router.feedback(d.decision_id, approved=True)  # changed their mind
    assert router.profile(d.agent_id, "code").avg_quality == 1.0
    counts = router.trust_layer.book.counts(d.agent_id, "code")
    assert (counts.positive, counts.approvals, counts.rejections) == (1, 1, 0)
    # several keys: the policy's weighted mean, each key's scale mapped onto [0, 1]
    router.feedback(d.decision_id, score=0.4, key="judge")
    assert router.profile(d.agent_id, "code").avg_quality == pytest.approx(0.7)


def test_keys_combine_by_weight_and_scale() -> None:
    policy = {"keys": {"judge": {"weight": 3, "scale": [1, 10]}}}
    with AgentRouter(agents=["a"], store="mem://", seed=0, feedback=policy) as r:
        d = r.select("qa")
        r.record(d, success=True)
        r.feedback(d.decision_id, score=10, key="judge")
        r.feedback(d.decision_id, approved=False)
        assert r.profile("a", "qa").avg_quality == pytest.approx(0.75)
        with pytest.raises(ValueError, match=r"score must be >= 1\.0"):
            r.feedback(d.decision_id, score=0.5, key="judge")


def test_the_strategy_learns_from_feedback_not_from_the_success_flag() -> None:
    """Without feedback both look perfect; a verdict on each run tells them apart."""
    with AgentRouter(agents=["good", "bad"], store="mem://", seed=1) as r:
        for _ in range(60):
            for agent in ("good", "bad"):
                rec = r.record(agent_id=agent, task_type="t", success=True)
                r.feedback(rec.record_id, approved=agent == "good")
        picks = [r.select("t").agent_id for _ in range(200)]
        assert picks.count("good") >= 190
        r.refresh()  # the log folded again says the same
        assert r.profile("bad", "t").avg_quality == 0.0
        assert [r.select("t").agent_id for _ in range(50)].count("good") >= 48


@pytest.mark.parametrize(("default", "quality"), [("outcome", 1.0), (0.3, 0.3), ("ignore", None)])
def test_pending_runs_are_settled_by_the_default_after_the_wait(
        default: str | float, quality: float | None) -> None:
    with AgentRouter(agents=["a"], store="mem://", seed=0,
                     feedback={"wait_s": 0.3, "default": default}) as r:
        for _ in range(3):
            r.record(agent_id="a", task_type="t", success=True)
        r.record(agent_id="a", task_type="t", success=False)  # evidence at once: 0.0
        r.record(agent_id="a", task_type="t", success=True, quality=0.8)  # given: evidence
        p = r.profile("a", "t")
        assert p.pending == 3 and p.executions_total == 5
        assert p.avg_quality == pytest.approx(0.4)  # the failure and the given quality
        time.sleep(0.35)
        p = r.profile("a", "t")
        assert p.pending == 0 and p.executions_total == 5
        if quality is None:  # never quality evidence, still runs
            assert p.avg_quality == pytest.approx(0.4)
        else:
            assert p.avg_quality == pytest.approx((3 * quality + 0.8) / 5)
        counts = r.trust_layer.book.counts("a", "t")
        assert counts.observations == 5 and counts.negative == 1


def test_late_feedback_still_amends_after_the_default(tmp_path: Path) -> None:
    url = f"surrealkv://{tmp_path / 'db'}"
    with AgentRouter(agents=["a"], store=url, seed=0,
                     feedback={"wait_s": 0.1, "default": 0.5}) as r:
        d = r.select("t")
        r.record(d, success=True)
        time.sleep(0.15)
        assert r.profile("a", "t").avg_quality == 0.5
        r.feedback(d.decision_id, score=0.9)
        assert r.profile("a", "t").avg_quality == pytest.approx(0.9)
    with AgentRouter(agents=["a"], store=url, seed=0,
                     feedback={"wait_s": 0.1, "default": 0.5}) as r:  # from the log
        assert r.profile("a", "t").avg_quality == pytest.approx(0.9)
        assert r.profile("a", "t").pending == 0


def test_the_book_holds_the_pairs_awaiting_verdicts(tmp_path: Path) -> None:
    """The book's list of runs awaiting verdicts (``pending_versions``, ``pending_on``),
    read by the default strategy for the outcomes on their way on other task types,
    holds just the pairs with runs awaiting a verdict: as records place them, as
    verdicts settle them, and in a book restored from the cache or the log."""

    def waiting(r: AgentRouter) -> dict[str, dict[str, int]]:
        return {t: r.book.pending_on(t) for t in r.book.pending_versions()}

    url = f"surrealkv://{tmp_path / 'db'}"
    policy = {"wait_s": 3600, "default": "ignore"}
    with AgentRouter(agents=["a", "b"], store=url, seed=0, feedback=policy) as r:
        first = r.record(agent_id="a", task_type="t", success=True)
        r.record(agent_id="a", task_type="t", success=True)
        last = r.record(agent_id="b", task_type="u", success=True)
        r.record(agent_id="b", task_type="t", success=True, quality=0.7)  # judged at once
        assert waiting(r) == {"t": {"a": 2}, "u": {"b": 1}}
        versions = r.book.pending_versions()
        r.feedback(first.record_id, approved=True)
        r.feedback(last.record_id, score=0.4)
        assert waiting(r) == {"t": {"a": 1}} and r.book.pending_on("t") == {"a": 1}
        assert r.book.pending_versions()["t"] != versions["t"]  # its counts changed
    with AgentRouter(agents=["a", "b"], store=url, seed=0, feedback=policy) as r:
        assert waiting(r) == {"t": {"a": 1}}  # the cached projection
        r.refresh()  # the whole log
        assert waiting(r) == {"t": {"a": 1}}
        assert r.profile("a", "t").pending == 1


def test_a_failure_is_evidence_at_once_unless_feedback_says_otherwise() -> None:
    with AgentRouter(agents=["a"], store="mem://", seed=0, feedback={"wait_s": 60}) as r:
        rec = r.record(agent_id="a", task_type="t", success=False)
        assert r.profile("a", "t").pending == 0
        r.feedback(rec.record_id, approved=True)  # the fallback answer was fine after all
        assert r.profile("a", "t").avg_quality == 1.0


def test_run_ids_and_record_ids_are_refs() -> None:
    with AgentRouter(agents=["a"], store="mem://", seed=0) as r:
        rec = r.record(agent_id="a", task_type="t", success=True,
                       run_ids=["run-outer", "run-inner"])
        r.feedback("run-inner", approved=False)
        assert r.profile("a", "t").avg_quality == 0.0
        rows = r.store.repository(TrustRepository).feedback("a", "t")
        assert rows[0]["record_id"] == rec.record_id and rows[0]["ref"] == "run-inner"
        with pytest.raises(UnknownDecision, match="no-such-run"):
            r.feedback("no-such-run", approved=True)


def test_a_feedback_id_counts_once(router: AgentRouter) -> None:
    d = router.select("t")
    router.record(d, success=True)
    for _ in range(3):
        router.feedback(d.decision_id, approved=True, feedback_id="fb-1", key="k")
    counts = router.trust_layer.book.counts(d.agent_id, "t")
    assert counts.approvals == 1
    assert len(router.store.repository(TrustRepository).feedback(d.agent_id, "t")) == 1


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"score": 1.5}, "score must be <= 1.0"),
    ({"score": -0.1}, "score must be >= 0.0"),
    ({"score": math.nan}, "score must be a finite number"),
    ({"score": 0.5, "approved": True}, "exactly one of approved .* got both"),
    ({}, "exactly one of approved .* got neither"),
    ({"approved": "yes"}, "approved must be True or False"),
    ({"approved": True, "key": ""}, "key must not be empty"),
])
def test_bad_input_is_one_line_and_stores_nothing(router: AgentRouter, kwargs: dict,
                                                  message: str) -> None:
    d = router.select("t")
    router.record(d, success=True, quality=0.7)
    with pytest.raises((ValueError, TypeError), match=message) as info:
        router.feedback(d.decision_id, **kwargs)
    assert "\n" not in str(info.value)
    assert router.store.repository(TrustRepository).feedback(d.agent_id, "t") == []
    assert router.profile(d.agent_id, "t").avg_quality == pytest.approx(0.7)


def test_review_signal_and_feedback_follow_unknown_agents_error(kv_url: str) -> None:
    with AgentRouter(agents=["a"], store=kv_url, seed=0, unknown_agents="allow") as r:
        rec = r.record(agent_id="typo", task_type="t", success=True)
    with AgentRouter(agents=["a"], store=kv_url, seed=0, unknown_agents="error") as r2:
        with pytest.raises(UnknownAgent, match="typo"):
            r2.review("typo", "t", approved=True)
        with pytest.raises(UnknownAgent, match="typo"):
            r2.signal("typo", "t", "user_accepted")
        with pytest.raises(UnknownAgent, match="typo"):
            r2.feedback(rec.record_id, approved=True)
        assert r2.store.repository(TrustRepository).feedback("typo", "t") == []


def test_feedback_policy_is_checked() -> None:
    with pytest.raises(ValueError, match="default must be"):
        FeedbackPolicy.of({"default": "sometimes"})
    with pytest.raises(ValueError, match="scale must be"):
        FeedbackPolicy.of({"keys": {"judge": {"scale": [10, 1]}}})
    with pytest.raises(ValueError, match="wait_s"):
        FeedbackPolicy.of({"wait_s": -1})


def test_afeedback_is_the_async_twin(router: AgentRouter) -> None:
    async def main() -> float:
        d = router.select("t")
        await router.arecord(d, success=True)
        return (await router.afeedback(d.decision_id, approved=True)).human

    assert asyncio.run(main()) > 0.5


def test_the_report_shows_the_share_judged_and_the_median_delay(
        kv_url: str, tmp_path: Path) -> None:
    with AgentRouter(agents=["a"], store=kv_url, seed=0) as r:
        decisions = [r.select("chat") for _ in range(4)]
        for d in decisions:
            r.record(d, success=True)
        r.feedback(decisions[0].decision_id, approved=True)
        r.feedback(decisions[1].decision_id, score=0.2)
        r.feedback(decisions[1].decision_id, score=0.4, key="judge")
        r.record(agent_id="a", task_type="code", success=True)
        text = r.report(tmp_path / "r.html").read_text(encoding="utf-8")
    section = text[text.index('<section id="feedback">'):]
    section = section[:section.index("</section>")]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", section)
    assert cells[:4] == ["chat", "4", "2", "50.0%"]
    assert cells[4].endswith(" ms") or cells[4].endswith(" s")
    assert cells[5:9] == ["code", "1", "0", "0.0%"] and cells[9] == "—"


def test_feedback_state_forgets_old_settled_runs_but_keeps_pending_ones() -> None:
    from trustroute.router.feedback.state import FeedbackState, Run

    state = FeedbackState(FeedbackPolicy(wait_s=10), memory=3)
    for n in range(6):
        run = Run(f"r{n}", "a", "t", 100.0 + n, True, 0.5 if n % 2 else None, n, n)
        state.place(run, now=100.0)
        state.join_decision(run, f"d{n}", now=100.0)
    known = {f"r{n}": state.quality_of(f"r{n}")[0] for n in range(6)}
    assert known["r0"] and known["r2"] and known["r4"]  # pending: kept
    assert not known["r1"]  # the oldest settled run is forgotten, by its decision too
    assert state.run("d1") is None and state.run("d0") is not None
    assert [c.run.record_id for c in state.settle_due(111.0)] == ["r0"]


def test_a_regression_revealed_by_late_verdicts_is_noticed() -> None:
    """The change monitor sees verdicts: an agent that was good (its quality known at
    record time) regresses, and only late verdicts say so; it is abandoned at once
    instead of after its old evidence has faded."""
    draws = random.Random(5)
    with AgentRouter(agents=["a", "b"], store="mem://", seed=1, strategy="thompson",
                     feedback={"wait_s": 3600, "default": "ignore"}) as r:
        for _ in range(150):
            for agent, mean in (("a", 0.9), ("b", 0.5)):
                r.record(agent_id=agent, task_type="t", success=True,
                         quality=float(draws.random() < mean))
        late = [r.record(agent_id="a", task_type="t", success=True) for _ in range(20)]
        assert r.profile("a", "t").pending == 20
        for rec in late:  # the regression: verdicts on runs recorded earlier
            r.feedback(rec.record_id, score=float(draws.random() < 0.1), key="judge")
        assert r.profile("a", "t").pending == 0
        picks = [r.select("t").agent_id for _ in range(40)]
        assert picks.count("b") >= 36


def test_a_verdict_on_an_execution_folded_too_long_ago_amends_it_by_a_rebuild(
        tmp_path: Path) -> None:
    """Past ``remember`` executions a router keeps no run to amend: on an embedded store
    the verdict's call rebuilds from the log, and the rebuilt router amends at once."""
    url = f"surrealkv://{tmp_path / 'db'}"
    policy = {"remember": 5}
    with AgentRouter(agents=["a"], store=url, feedback=policy) as r:
        old = r.record(agent_id="a", task_type="t", success=True, quality=0.5)
        for _ in range(11):
            r.record(agent_id="a", task_type="t", success=True, quality=0.5)
        r.feedback(old.record_id, score=1.0)
        assert r.profile("a", "t").avg_quality == pytest.approx((11 * 0.5 + 1.0) / 12)
        r.feedback(old.record_id, score=0.0)  # the user changes their mind
        assert r.profile("a", "t").avg_quality == pytest.approx(11 * 0.5 / 12)
    with AgentRouter(agents=["a"], store=url, feedback=policy) as r:
        assert r.profile("a", "t").avg_quality == pytest.approx(11 * 0.5 / 12)


def test_a_verdict_after_a_restart_amends_an_execution_of_before_it(tmp_path: Path) -> None:
    """A router opened from a cached projection without runs (no verdict yet, no wait)
    still amends an earlier execution at once."""
    url = f"surrealkv://{tmp_path / 'db'}"
    with AgentRouter(agents=["a"], store=url) as r:
        recs = [r.record(agent_id="a", task_type="t", success=True, quality=0.9)
                for _ in range(10)]
    with AgentRouter(agents=["a"], store=url) as r:
        r.feedback(recs[0].record_id, score=0.0)
        live = r.profile("a", "t")
        r.refresh()
        rebuilt = r.profile("a", "t")
    assert live.avg_quality == rebuilt.avg_quality == pytest.approx(0.81)
    assert live.expertise == pytest.approx(rebuilt.expertise)


@pytest.mark.parametrize("when", ["before", "between", "after"])
def test_a_decision_recorded_twice_takes_its_verdict_on_the_first_run_live_and_rebuilt(
        when: str) -> None:
    with AgentRouter(agents=["a"], store="mem://") as r:
        d = r.select("t")
        r.flush()  # the decision is logged: a verdict may come before its run
        for quality, step in ((0.9, "before"), (0.6, "between")):
            if when == step:
                r.feedback(d.decision_id, approved=False)
            r.record(d, success=True, quality=quality)
        if when == "after":
            r.feedback(d.decision_id, approved=False)
        live = r.profile("a", "t").avg_quality
        r.refresh()
        assert live == r.profile("a", "t").avg_quality == pytest.approx(0.3)

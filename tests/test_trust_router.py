"""The trust layer inside AgentRouter, on real embedded SurrealDB stores."""

from __future__ import annotations

import uuid

import pytest

from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router import AgentRouter, NoAgentAvailable
from trustroute.router.errors import UnknownDecision
from trustroute.router.trust.options import TrustOptions
from trustroute.router.trust.policy import TierPolicy
from trustroute.router.trust.scores import (
    Tier,
    composite_confidence,
    effectiveness_score,
    human_score,
    tier_for,
)


def test_decision_carries_confidence_tier_and_abstention_fields(router: AgentRouter) -> None:
    d = router.select("code")
    assert d.confidence is not None and 0.0 <= d.confidence <= 1.0
    assert d.tier in ("weak", "medium", "strong")
    assert d.abstained is False and d.abstain_reason is None
    assert d.as_dict()["tier"] == d.tier


def test_record_updates_trust_counts_and_scores(router: AgentRouter) -> None:
    assert router.trust("a", "code").tier == Tier.MODERATE  # new profiles start moderate
    for q in (0.9, 0.8, 0.3):
        router.record(agent_id="a", task_type="code", success=True, quality=q)
    router.record(agent_id="a", task_type="code", success=False)
    f, e, h, c, tier = router.trust("a", "code")
    assert f == pytest.approx(0.5)  # 4 observations
    assert e == pytest.approx(effectiveness_score(2, 1, 1))  # 0.3 is neutral
    assert h == 0.5
    assert c == pytest.approx(composite_confidence(f, e, h))
    assert tier == tier_for(c)
    counts = router.trust_layer.book.counts("a", "code")
    assert (counts.observations, counts.positive, counts.negative, counts.neutral) == (
        4, 2, 1, 1)
    router.refresh()  # the counts are the log's: folding it again gives them back
    assert router.trust_layer.book.counts("a", "code") == counts
    assert router.trust("a", "code") == (f, e, h, c, tier)


def test_feedback_on_a_decision_moves_the_chosen_agents_human_score(
        router: AgentRouter) -> None:
    d = router.select("code")
    router.record(d, success=True, quality=0.9)
    router.feedback(d.decision_id, approved=True)
    router.feedback(d.decision_id, approved=True, comment="great")
    # the same key again on one execution: the later verdict stands (a change of mind)
    scores = router.feedback(d.decision_id, approved=False)
    assert scores.human == pytest.approx(human_score(0, 1))
    others = [router.select("code", exclude=[a for a in ("a", "b") if a != d.agent_id])
              for _ in range(2)]
    for other in others:
        router.record(other, success=True)
        scores = router.feedback(other.decision_id, approved=True)
    assert scores.human == pytest.approx(human_score(2, 1))
    assert router.trust(d.agent_id, "code").human == pytest.approx(human_score(2, 1))
    rows = router.store.repository(TrustRepository).feedback(d.agent_id, "code")
    assert [r["approved"] for r in rows] == [True, True, False, True, True]
    assert rows[1]["comment"] == "great"


def test_feedback_on_an_unknown_decision_is_a_clear_error(router: AgentRouter) -> None:
    with pytest.raises(UnknownDecision, match="nope"):
        router.feedback("nope", approved=True)


def test_feedback_survives_a_reopen_and_finds_old_decisions(kv_url: str) -> None:
    with AgentRouter(agents=["a"], store=kv_url, seed=0) as r:
        d = r.select("code")
        r.record(d, success=True)
    with AgentRouter(agents=["a"], store=kv_url, seed=0) as r:
        r.feedback(d.decision_id, approved=True)  # found in the stored decision log
    with AgentRouter(agents=["a"], store=kv_url, seed=0) as r:
        assert r.trust("a", "code").human == pytest.approx(human_score(1, 0))
        assert r.trust("a", "code").frequency == pytest.approx(0.3)


def test_explicit_review_pins_human_score(router: AgentRouter) -> None:
    assert router.review("a", "code", approved=True).human == 0.95
    assert router.review("a", "code", approved=False).human == pytest.approx(
        human_score(1, 1))


def test_named_signals_through_the_router(router: AgentRouter) -> None:
    router.signal("a", "code", "pattern_contradicted")
    router.signal("a", "code", "applied_successfully")
    counts = router.trust_layer.book.counts("a", "code")
    assert (counts.contradictions, counts.positive, counts.observations) == (1, 1, 1)
    with pytest.raises(ValueError, match="unknown trust signal"):
        router.signal("a", "code", "bogus")


def test_rescue_by_another_agent_is_a_contradiction(router: AgentRouter) -> None:
    task = str(uuid.uuid4())
    first = router.select("code")
    other = "b" if first.agent_id == "a" else "a"
    router.record(first, success=False, metadata={"task_id": task, "attempt": 0})
    second = router.select("code", exclude=[first.agent_id])
    assert second.agent_id == other
    router.record(second, success=True, metadata={"task_id": task, "attempt": 1})
    assert router.trust_layer.book.counts(first.agent_id, "code").contradictions == 1
    assert router.trust_layer.book.counts(other, "code").contradictions == 0
    assert router.trust(first.agent_id, "code").frequency == pytest.approx(0.2)


def test_decision_log_is_joined_with_outcomes(router: AgentRouter) -> None:
    d1 = router.select("code")
    d2 = router.select("code")
    router.record(d1, success=True, quality=0.8)
    router.flush()
    log = router.store.repository(DecisionRepository)
    row1, row2 = log.get(d1.decision_id), log.get(d2.decision_id)
    assert row1 is not None and row2 is not None
    assert row1["success"] is True and row1["quality"] == pytest.approx(0.8)
    assert row1["confidence"] == pytest.approx(d1.confidence)
    assert [c["agent_id"] for c in row1["candidates"]] == d1.ranking
    assert row2.get("success") is None  # no outcome yet
    router.record(d2, success=False)  # outcome after the decision was written
    router.flush()
    row2 = log.get(d2.decision_id)
    assert row2 is not None and row2["success"] is False


def test_decision_log_keeps_the_head_of_a_long_ranking() -> None:
    agents = [f"agent{i}" for i in range(20)]
    with AgentRouter(agents=agents, store="mem://", seed=1,
                     trust=TrustOptions(log_candidates=3)) as r:
        d = r.select("code")
        r.record(d, success=True)
        r.flush()
        row = r.store.repository(DecisionRepository).get(d.decision_id)
    assert row is not None and row["candidate_count"] == 20
    assert [c["agent_id"] for c in row["candidates"]] == d.ranking[:3]
    chosen, *others = row["candidates"]
    assert chosen["agent_id"] == d.agent_id and chosen["reason"] == d.chosen.reason
    assert all("reason" not in c and "components" not in c for c in others)
    with pytest.raises(ValueError, match="log_candidates"):
        TrustOptions(log_candidates=0)


def test_select_does_not_touch_the_database(router: AgentRouter,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    router.record(agent_id="a", task_type="code", success=True)
    router.flush()

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("select() queried the database")

    monkeypatch.setattr(router.store.conn, "run", forbidden)
    for _ in range(200):
        router.select("code")


def test_calibration_map_learns_from_outcomes_and_is_restored(kv_url: str) -> None:
    options = TrustOptions()
    with AgentRouter(agents=["a"], store=kv_url, seed=0, strategy="confidence_weighted",
                     trust=options) as r:
        r.record(agent_id="a", task_type="code", success=True, quality=0.85)
        first = r.select("code")
        assert first.confidence == pytest.approx(0.85, abs=1e-9)  # identity without data
        for _ in range(60):  # says 0.85, succeeds a third of the time
            d = r.select("code")
            r.record(d, success=False, quality=0.85)
            r.record(r.select("code"), success=False, quality=0.85)
            r.record(r.select("code"), success=True, quality=0.85)
        later = r.select("code")
        assert later.confidence is not None
        assert later.confidence < 0.5  # pulled most of the way to the realised third
    with AgentRouter(agents=["a"], store=kv_url, seed=0, strategy="confidence_weighted") as r:
        again = r.select("code")
        assert again.confidence == pytest.approx(later.confidence, abs=0.02)


def test_deprecated_agents_are_not_selected_but_new_ones_explore(router: AgentRouter) -> None:
    for _ in range(20):  # a complete record: 20 failures, each rescued -> contradictions
        task = str(uuid.uuid4())
        router.record(agent_id="a", task_type="code", success=False,
                      metadata={"task_id": task, "attempt": 0})
        router.record(agent_id="b", task_type="code", success=True,
                      metadata={"task_id": task, "attempt": 1})
    assert router.trust("a", "code").tier == Tier.DEPRECATED
    assert {router.select("code").agent_id for _ in range(30)} == {"b"}
    d = router.select("code")
    assert d.ranking == ["b", "a"]  # still listed, last, saying why
    assert d.candidates[1].reason.startswith("not selected: trust tier deprecated")
    router.register("c")  # brand new: never blocked
    assert router.select("code").ranking[-1] == "a"
    assert "c" in router.select("code").ranking[:2]
    with pytest.raises(NoAgentAvailable, match="deprecated"):
        router.select("code", exclude=["b", "c"])


def test_a_few_unlucky_verdicts_never_shut_a_good_agent_out() -> None:
    """Users approve one agent 9 times in 10 and the other 2 in 10, but the good one's
    first verdicts are 1 approval in 3: its composite is 0.19 (deprecated). The router
    still comes back to it, and it wins its traffic."""
    with AgentRouter(agents=["good", "bad"], store="mem://", seed=0,
                     feedback={"wait_s": 3600, "default": "ignore"}) as r:
        def judged(agent: str, approved: bool) -> None:
            ref = r.record(agent_id=agent, task_type="chat", success=True).record_id
            r.feedback(ref, approved=approved)

        for approved in (True, False, False):
            judged("good", approved)
        for i in range(10):
            judged("bad", i % 5 == 0)
        assert r.trust("good", "chat").tier == Tier.DEPRECATED
        chosen = []
        for i in range(100):
            d = r.select("chat")
            r.record(d, success=True)
            rate = 9 if d.agent_id == "good" else 2  # approvals in every 10 verdicts
            r.feedback(d.decision_id, approved=i % 10 < rate)
            chosen.append(d.agent_id)
        assert chosen[50:].count("good") >= 45
        assert r.trust("good", "chat").tier != Tier.DEPRECATED


def test_one_unlucky_run_never_blocks_a_new_agent(router: AgentRouter) -> None:
    router.record(agent_id="a", task_type="code", success=False)
    assert router.trust("a", "code").tier == Tier.DEPRECATED  # 1 failure: composite 0.161
    assert router.trust_layer.book.deprecated_pairs == 1  # the policy is active
    assert router.select("code", exclude=["b"]).agent_id == "a"


def test_exploit_only_prefers_core_and_strong() -> None:
    with AgentRouter(agents=["pro", "rookie"], store="mem://", seed=0, exploit_only=True,
                     trust=TrustOptions(policy=TierPolicy())) as r:
        for _ in range(25):
            r.record(agent_id="pro", task_type="code", success=True, quality=0.7)
        r.review("pro", "code", approved=True)
        for _ in range(3):
            r.record(agent_id="rookie", task_type="code", success=True, quality=1.0)
        assert r.trust("pro", "code").tier in (Tier.CORE, Tier.STRONG)
        assert r.trust("rookie", "code").tier not in (Tier.CORE, Tier.STRONG)
        chosen = {r.select("code").agent_id for _ in range(20)}
        assert chosen == {"pro"}
        d = r.select("code")
        assert d.ranking == ["pro", "rookie"]
        assert "exploit-only" in d.candidates[1].reason
    with AgentRouter(agents=["pro", "rookie"], store="mem://", seed=0,
                     exploit_only=True, trust=TrustOptions(
                         policy=TierPolicy(exploit_trusted_only=False))) as r:
        for _ in range(25):
            r.record(agent_id="pro", task_type="code", success=True, quality=0.7)
        assert all("not selected" not in c.reason for c in r.select("code").candidates)


def _deprecate(r: AgentRouter, agent: str, rescuer: str, times: int = 6) -> None:
    for _ in range(times):
        task = str(uuid.uuid4())
        r.record(agent_id=agent, task_type="code", success=False,
                 metadata={"task_id": task, "attempt": 0})
        r.record(agent_id=rescuer, task_type="code", success=True,
                 metadata={"task_id": task, "attempt": 1})


def test_a_reopened_router_holds_every_pair_of_the_log(kv_url: str) -> None:
    with AgentRouter(agents=["a", "b"], store=kv_url, seed=0) as r:
        _deprecate(r, "a", "b")
        counts = r.trust_layer.book.all_counts()
        bad, good = r.trust("a", "code"), r.trust("b", "code")
    assert bad.tier == Tier.DEPRECATED
    with AgentRouter(agents=["a", "b"], store=kv_url, seed=0) as r:
        assert r.trust_layer.book.pairs() == [("a", "code"), ("b", "code")]
        assert r.trust_layer.book.all_counts() == counts
        assert (r.trust("a", "code"), r.trust("b", "code")) == (bad, good)
        d = r.select("code")  # no record yet: the tier is known anyway
        assert d.agent_id == "b" and d.ranking == ["b", "a"]
        r.record(agent_id="b", task_type="code", success=True)
        counts = r.trust_layer.book.counts("b", "code")
        assert counts.observations == 7 and counts.positive == 7  # stored 6 + this one
    with AgentRouter(agents=["a", "b"], store=kv_url, seed=0, exploit_only=True) as r:
        assert r.trust_layer.book.pairs() == [("a", "code"), ("b", "code")]
        assert r.trust_layer.book.counts("b", "code").observations == 7


def test_routers_sharing_a_store_add_up(kv_url: str) -> None:
    with AgentRouter(agents=["a"], store=kv_url, seed=0) as first:
        for _ in range(5):
            first.record(agent_id="a", task_type="code", success=True)
        second = AgentRouter(agents=["a"], store=first.store, seed=1)
        assert second.trust_layer.book.counts("a", "code").observations == 5  # the log's
        second.record(agent_id="a", task_type="code", success=False)
        assert second.trust_layer.book.counts("a", "code").observations == 6
        second.close()
        assert first.trust_layer.book.counts("a", "code").observations == 5
        assert first.projection.catch_up() == 1  # the other router's row, folded once
        assert first.projection.catch_up() == 0
        counts = first.trust_layer.book.counts("a", "code")
        assert (counts.observations, counts.positive, counts.negative) == (6, 5, 1)
        assert first.trust("a", "code").frequency == pytest.approx(0.7)  # 6 observations
        first.refresh()
        assert first.trust_layer.book.counts("a", "code") == counts

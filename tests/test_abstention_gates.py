"""Abstention gates, their order, and what the router does when one fires."""

from __future__ import annotations

import threading

import pytest

from trustroute.profiles.profile import TaskTypeProfile
from trustroute.router import AgentRouter
from trustroute.router.config import RouterConfig
from trustroute.router.decision import CandidateScore
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher, TransferRequest
from trustroute.router.strategies import ArmScore
from trustroute.router.trust.abstention import (
    Abstained,
    AbstentionPolicy,
    Conflicted,
    GateView,
    SparseEvidence,
    WeakResonance,
    runner_up_chance,
)


def _cand(agent_id: str, executions: int, probability: float | None) -> CandidateScore:
    profile = TaskTypeProfile(agent_id=agent_id, task_type="code",
                              executions_total=executions)
    return CandidateScore(agent_id=agent_id, profile=profile, load=0.0, score=0.0,
                          final_score=0.0, verdict=ArmScore(0.0, success_probability=probability))


def _view(probs: list[float | None], executions: list[int]) -> GateView:
    cands = [_cand(f"a{i}", n, p) for i, (p, n) in enumerate(zip(probs, executions,
                                                                  strict=True))]
    return GateView("code", cands, lambda p: p)


def test_weak_resonance_fires_below_the_floor_only() -> None:
    gate = WeakResonance(floor=0.5)
    assert gate(_view([0.3, 0.45], [10, 10])) is not None
    assert gate(_view([0.3, 0.5], [10, 10])) is None  # one candidate reaches the floor
    assert gate(_view([None, None], [0, 0])) is None  # unknown is not weak


def test_sparse_evidence_counts_candidates_with_outcomes() -> None:
    gate = SparseEvidence(min_candidates=2)
    assert gate(_view([0.9, 0.5, 0.5], [5, 0, 0])) is not None
    assert gate(_view([0.9, 0.5, 0.5], [5, 1, 0])) is None


def test_conflicted_fires_on_a_coin_toss_not_on_a_clear_winner() -> None:
    gate = Conflicted(ceiling=0.4)
    assert gate(_view([0.61, 0.60], [5, 5])) is not None
    assert gate(_view([0.90, 0.30], [50, 50])) is None
    assert gate(_view([0.9], [50])) is None  # nothing to conflict with
    assert runner_up_chance(0.5, 10, 0.5, 10) == pytest.approx(0.5)
    assert runner_up_chance(0.9, 100, 0.1, 100) < 1e-6


def test_gates_are_evaluated_in_order_first_that_fires_wins() -> None:
    policy = AbstentionPolicy(sparse_evidence=SparseEvidence(enabled=True),
                              conflicted=Conflicted(enabled=True))
    assert [g.name for g in policy.gates] == ["weak_resonance", "sparse_evidence",
                                              "conflicted"]
    assert policy.evaluate(_view([0.3, 0.29], [0, 1]))[0] == "weak_resonance"  # type: ignore[index]
    assert policy.evaluate(_view([0.7, 0.69], [3, 0]))[0] == "sparse_evidence"  # type: ignore[index]
    assert policy.evaluate(_view([0.7, 0.69], [3, 3]))[0] == "conflicted"  # type: ignore[index]
    assert policy.evaluate(_view([0.95, 0.2], [90, 90])) is None


def test_only_enabled_gates_are_evaluated() -> None:
    assert [g.name for g in AbstentionPolicy().gates] == ["weak_resonance"]
    quiet = AbstentionPolicy(weak_resonance=WeakResonance(enabled=False))
    assert quiet.gates == ()
    assert quiet.evaluate(_view([0.1, 0.1], [0, 0])) is None


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="on_abstain"):
        AbstentionPolicy(on_abstain="shrug")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="floor"):
        WeakResonance(floor=1.5)
    with pytest.raises(ValueError, match="min_candidates"):
        SparseEvidence(min_candidates=0)


def _failing_router(**kwargs: object) -> AgentRouter:
    r = AgentRouter(agents=["a", "b"], store="mem://", seed=0,
                    strategy="confidence_weighted", **kwargs)  # type: ignore[arg-type]
    for agent in ("a", "b"):
        for _ in range(5):
            r.record(agent_id=agent, task_type="code", success=False, quality=0.1)
    return r


def test_default_routes_anyway_flagged_weak_resonance() -> None:
    with _failing_router() as r:
        d = r.select("code")
        assert d.abstained is True
        assert d.abstain_reason == "weak_resonance"
        assert d.agent_id in ("a", "b")
        assert d.tier == "weak"
        r.record(d, success=False)
        r.flush()
        from trustroute.profiles.store.decisions import DecisionRepository

        row = r.store.repository(DecisionRepository).get(d.decision_id)
        assert row is not None and row["abstained"] is True
        assert "floor" in row["abstain_detail"]


def test_no_abstention_with_good_agents(router: AgentRouter) -> None:
    for _ in range(10):
        router.record(agent_id="a", task_type="code", success=True, quality=0.95)
    d = router.select("code", exclude=["b"])
    assert d.abstained is False and d.abstain_reason is None


def test_on_abstain_raise_releases_the_slot() -> None:
    with _failing_router(abstention=AbstentionPolicy(on_abstain="raise")) as r:
        with pytest.raises(Abstained, match="weak_resonance") as info:
            r.select("code", acquire=True)
        assert info.value.decision.abstained
        assert r.in_flight("a") == 0 and r.in_flight("b") == 0


def test_on_abstain_human_hands_off_through_transfer_hooks() -> None:
    received: list[TransferRequest] = []
    done = threading.Event()

    def hook(request: TransferRequest) -> None:
        received.append(request)
        done.set()

    dispatcher = TransferDispatcher([CallableHook(hook)])
    with _failing_router(abstention=AbstentionPolicy(on_abstain="human"),
                         transfer=dispatcher) as r:
        d = r.select("code", context={"question": "why?"})
        assert done.wait(5.0)
    assert d.abstained
    req = received[0]
    assert req.decision_id == d.decision_id
    assert req.reason.startswith("weak_resonance")
    assert req.confidence == pytest.approx(d.confidence)
    assert req.input == {"question": "why?"}


def test_config_sections_build_the_gates() -> None:
    cfg = RouterConfig.model_validate({
        "agents": ["a", "b"], "store": "mem://",
        "abstention": {"on_abstain": "raise", "weak_resonance": {"enabled": False},
                       "sparse_evidence": {"enabled": True, "min_candidates": 1}},
        "trust": {"confidence_tiers": {"medium": 0.3, "strong": 0.9}},
    })
    with cfg.build_router() as r:
        with pytest.raises(Abstained, match="sparse_evidence"):
            r.select("code")
        r.record(agent_id="a", task_type="code", success=True)
        d = r.select("code")
        assert not d.abstained
        tiers = r.trust_layer.options.confidence_tiers
        assert (tiers.medium, tiers.strong) == (0.3, 0.9)


@pytest.mark.parametrize(("section", "message"), [
    ({"trust": {"weights": [0.5, 0.5, 0.5]}}, "sum to 1"),
    ({"trust": {"colour": "blue"}}, "colour"),
    ({"abstention": {"on_abstain": "shrug"}}, "on_abstain"),
    ({"abstention": {"conflicted": {"ceiling": 2}}}, "ceiling"),
])
def test_bad_config_is_rejected_naming_the_key(section: dict[str, object], message: str
                                               ) -> None:
    with pytest.raises(ValueError, match=message):
        RouterConfig.model_validate(section)

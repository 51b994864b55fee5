"""The trust layer on its own: admit, judge, settle, and the Learner interface."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import TaskTypeProfile
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router.config import ConfigError, RouterConfig, load_config
from trustroute.router.decision import CandidateScore, RoutingDecision, new_decision_id
from trustroute.router.errors import NoAgentAvailable
from trustroute.router.learner import Learner
from trustroute.router.strategies import ArmScore
from trustroute.router.trust.abstention import Abstained, AbstentionPolicy, SparseEvidence
from trustroute.router.trust.layer import TrustLayer
from trustroute.router.trust.options import ConfidenceTiers, TrustOptions
from trustroute.router.trust.scores import Tier

T0 = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[Store]:
    s = Store("mem://")
    yield s
    s.close()


def _cand(agent_id: str, probability: float | None, executions: int = 0,
          reason: str = "ranked") -> CandidateScore:
    profile = TaskTypeProfile(agent_id=agent_id, task_type="code",
                              executions_total=executions)
    return CandidateScore(agent_id=agent_id, profile=profile, load=0.0, score=0.0,
                          final_score=0.0,
                          verdict=ArmScore(0.0, reason, success_probability=probability))


def _decide(layer: TrustLayer, ranked: list[CandidateScore]) -> RoutingDecision:
    verdict = layer.gate.judge("code", ranked)
    decision = RoutingDecision(
        decision_id=new_decision_id(), task_type="code", agent_id=ranked[0].agent_id,
        candidates=tuple(ranked), strategy="test", created_at=T0,
        confidence=verdict.confidence, tier=verdict.tier, abstained=verdict.abstained,
        abstain_reason=verdict.abstain_reason)
    layer.gate.settle(decision, verdict)
    return decision


def _records(agent: str, outcomes: list[bool], **extra: object) -> list[
        tuple[ExecutionRecord, int]]:
    return [(ExecutionRecord(agent_id=agent, task_type="code", success=ok, timestamp=T0,
                             **extra), i) for i, ok in enumerate(outcomes)]  # type: ignore[arg-type]


def _own(layer: TrustLayer, batch: list[tuple[ExecutionRecord, int]]) -> None:
    """Fold ``batch`` as this router's own writes (they enter its confidence history and
    are joined with its decisions)."""
    layer.expect([r.record_id for r, _ in batch])
    layer.fold(batch)


def _deprecate(layer: TrustLayer, agent: str, rescuer: str, times: int = 3) -> None:
    """``times`` failures of ``agent``, each rescued by ``rescuer``: deprecated."""
    layer.fold(_records(agent, [False] * times, metadata={"task_id": "T", "attempt": 0}))
    layer.fold(_records(rescuer, [True], metadata={"task_id": "T", "attempt": 1}))


def test_the_layer_is_a_learner(store: Store) -> None:
    assert isinstance(TrustLayer(store, "test"), Learner)


def test_judge_is_pure_and_settle_buffers_the_decision(store: Store) -> None:
    layer = TrustLayer(store, "test", TrustOptions(
        confidence_tiers=ConfidenceTiers(medium=0.6, strong=0.9)))
    ranked = [_cand("a", 0.7), _cand("b", 0.2)]
    verdict = layer.gate.judge("code", ranked)
    assert (verdict.raw, verdict.confidence, verdict.tier) == (0.7, 0.7, "medium")
    assert not verdict.abstained and verdict.abstain_reason is None
    assert layer.decisions.backlog == 0  # judging buffers nothing
    decision = _decide(layer, ranked)
    assert layer.decisions.backlog == 1
    layer.flush()
    row = store.repository(DecisionRepository).get(decision.decision_id)
    assert row is not None and row["predicted"] == 0.7 and row["tier"] == "medium"
    assert [c["success_probability"] for c in row["candidates"]] == [0.7, 0.2]


def test_judge_without_an_estimate_uses_the_unknown_probability(store: Store) -> None:
    layer = TrustLayer(store, "test", TrustOptions(unknown_probability=0.3))
    verdict = layer.gate.judge("code", [_cand("a", None), _cand("b", None)])
    assert (verdict.raw, verdict.tier, verdict.abstained) == (0.3, "weak", False)
    assert layer.gate.judge("code", [_cand("a", 1.7)]).raw == 1.0  # clamped to a probability


def test_an_abstaining_verdict_is_acted_on_when_settled(store: Store) -> None:
    layer = TrustLayer(store, "test", abstention=AbstentionPolicy(
        on_abstain="raise", sparse_evidence=SparseEvidence(enabled=True)))
    ranked = [_cand("a", 0.9, executions=4), _cand("b", 0.8)]
    verdict = layer.gate.judge("code", ranked)
    assert (verdict.abstained, verdict.abstain_reason) == (True, "sparse_evidence")
    assert verdict.detail is not None and "1 candidate(s)" in verdict.detail
    with pytest.raises(Abstained, match="sparse_evidence"):
        _decide(layer, ranked)


def test_fold_counts_outcomes_and_rescues_and_rebuild_reloads_them(store: Store) -> None:
    layer = TrustLayer(store, "test")
    records = [r for r, _ in [
        *_records("a", [False] * 3, metadata={"task_id": "T", "attempt": 0}),
        *_records("b", [True], metadata={"task_id": "T", "attempt": 1})]]
    store.executions.record_many(records)  # the log the layer's counts are folded from
    placed, _ = ProfileBook().place(store.executions.scan())
    _own(layer, placed)
    counts = layer.book.counts("a", "code")
    assert (counts.observations, counts.negative, counts.contradictions) == (3, 3, 3)
    assert layer.book.scores("a", "code").tier == Tier.DEPRECATED
    layer.flush()
    history = store.repository(TrustRepository).history("a", "code")
    assert [h["reason"] for h in history] == ["execution negative x3, rescued by b x3"]
    fresh = TrustLayer(store, "test")
    for _ in range(2):  # a rebuild forgets what it held before folding the log again
        book = ProfileBook()
        fresh.rebuild(book, book.place(store.executions.scan())[0], store)
        assert fresh.book.pairs() == [("a", "code"), ("b", "code")]
        reloaded = fresh.book.counts("a", "code")
        assert (reloaded.observations, reloaded.negative, reloaded.contradictions) == (3, 3, 3)
        assert fresh.book.all_counts() == layer.book.all_counts()
        assert fresh.book.scores("a", "code").tier == Tier.DEPRECATED


def test_admit_moves_deprecated_candidates_last_and_says_why(store: Store) -> None:
    layer = TrustLayer(store, "test")
    _deprecate(layer, "a", "b", times=20)  # a complete record: the policy may exclude it
    ranked = layer.gate.admit("code", [_cand("a", 0.9), _cand("b", 0.5)])
    assert [c.agent_id for c in ranked] == ["b", "a"]
    assert ranked[1].reason == "not selected: trust tier deprecated; ranked"
    with pytest.raises(NoAgentAvailable, match="deprecated"):
        layer.gate.admit("code", [_cand("a", 0.9)])


def test_admit_in_exploit_only_mode_prefers_trusted_pairs(store: Store) -> None:
    layer = TrustLayer(store, "test", exploit_only=True)
    layer.fold(_records("pro", [True] * 25))
    layer.review("pro", "code", approved=True)
    assert layer.book.scores("pro", "code").tier in (Tier.CORE, Tier.STRONG)
    ranked = layer.gate.admit("code", [_cand("new", 0.9), _cand("pro", 0.8)])
    assert [c.agent_id for c in ranked] == ["pro", "new"]
    assert ranked[1].reason.startswith("not selected: exploit-only mode")


def test_the_config_sections_are_the_code_settings() -> None:
    config = RouterConfig.model_validate({
        "trust": {"weights": [0.5, 0.3, 0.2], "decay": {"frequency": 0.05},
                  "confidence_tiers": {"medium": 0.4, "strong": 0.7}},
        "abstention": {"on_abstain": "human", "conflicted": {"enabled": True}},
    })
    assert config.trust == TrustOptions(
        weights=(0.5, 0.3, 0.2), decay={"frequency": 0.05},  # type: ignore[arg-type]
        confidence_tiers=ConfidenceTiers(medium=0.4, strong=0.7))
    assert [g.name for g in config.abstention.gates] == ["weak_resonance", "conflicted"]
    with pytest.raises(ValueError, match="medium"):
        ConfidenceTiers(medium=0.9, strong=0.8)
    with pytest.raises(ValueError, match="colour"):
        TrustOptions(colour="blue")  # type: ignore[call-arg]


def test_bad_trust_values_in_a_file_name_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "router.yaml"
    path.write_text("trust:\n  decay: {frequency: -1}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: trust.decay.frequency: ")
    path.write_text("abstention:\n  weak_resonance: {flor: 0.3}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"abstention\.weak_resonance\.flor: unknown key.*"
                                          r"did you mean 'floor'"):
        load_config(path)


def test_a_failed_flush_keeps_everything_for_the_next(store: Store,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    layer = TrustLayer(store, "test")
    decision = _decide(layer, [_cand("a", 0.7)])
    _own(layer, _records("a", [True], decision_id=decision.decision_id))
    repo = store.repository(TrustRepository)

    def down(*args: object) -> None:
        raise OSError("store down")

    monkeypatch.setattr(store.conn, "run", down)
    with pytest.raises(OSError):
        layer.flush()
    _own(layer, _records("a", [False]))  # arrives while the first batch waits
    monkeypatch.undo()
    layer.flush()
    counts = layer.book.counts("a", "code")
    assert (counts.positive, counts.negative) == (1, 1)
    assert [h["reason"] for h in repo.history("a", "code")] == [
        "execution negative, execution positive"]
    row = store.repository(DecisionRepository).get(decision.decision_id)
    assert row is not None and row["success"] is True

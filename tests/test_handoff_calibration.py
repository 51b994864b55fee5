"""RetrievalConfidence.calibrate: recall on new data, few false transfers, persistence."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustroute.profiles.store import Store
from trustroute.router.config import RouterConfig
from trustroute.router.handoff.calibration import (
    rank_is_guaranteed,
    recall_lower_bound,
    required_rank,
)
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.stats import auroc


def synthetic(
    n: int, seed: int, *, shift: float = 0.0, hits: int = 5
) -> list[tuple[list[float], bool]]:
    """Top-k scores of covered (high) and needs-human (low) queries, like a small embedder."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        needs = i % 2 == 0
        top = rng.normal(0.55, 0.08) if needs else rng.normal(0.80, 0.05)
        top = float(np.clip(top + shift, -1.0, 1.0))
        scores = sorted((top - abs(rng.normal(0.03, 0.02)) * j for j in range(hits)), reverse=True)
        out.append((scores, needs))
    return out


def rates(rc: RetrievalConfidence, examples: list[tuple[list[float], bool]]) -> tuple[float, float]:
    moved = np.array([rc.evaluate(s).should_transfer for s, _ in examples])
    needs = np.array([n for _, n in examples])
    return float(moved[needs].mean()), float(moved[~needs].mean())


def test_calibrated_thresholds_generalise_to_fresh_data() -> None:
    rc = RetrievalConfidence.calibrate(synthetic(400, seed=1), target_recall=0.9)
    recall, false_rate = rates(rc, synthetic(6000, seed=2))
    assert recall == pytest.approx(0.9, abs=0.03)
    assert false_rate <= 0.05
    report = rc.calibration
    assert report is not None and rc.report is report
    assert report.guarantee_met and report.needs_human == 200 and report.covered == 200
    # the conformal rank: k / (P + 1) >= 0.9 with the smallest such k
    assert report.required_transfers == 181
    assert 0.9 <= report.expected_recall <= 0.92
    # the lower confidence bound is reported beside it, and sits below
    assert 0.8 < report.recall_lower_bound < report.expected_recall
    assert report.auroc is not None and report.auroc > 0.95


def test_recall_lands_at_the_target_not_above_it() -> None:
    # over many calibration samples of 100 needs-human cases, the held-out recall
    # averages the target (a 95% lower bound would put it several points above)
    fresh = synthetic(8000, seed=99)
    recalls = []
    for seed in range(30, 42):
        rc = RetrievalConfidence.calibrate(synthetic(200, seed=seed), target_recall=0.9)
        recalls.append(rates(rc, fresh)[0])
    assert float(np.mean(recalls)) == pytest.approx(0.9, abs=0.015)


def test_evidence_tokens_count_in_the_search_as_evaluate_counts_them() -> None:
    # half of the needs-human retrievals bring more evidence than fits (> 2,000 tokens),
    # which evaluate() marks insufficient: the thresholds are searched with that in
    rng = np.random.default_rng(3)

    def sample(n: int) -> list[tuple[list[float], bool, int]]:
        out = []
        for i in range(n):
            needs = i % 2 == 0
            top = float(rng.uniform(0.3, 0.8) if needs else rng.uniform(0.5, 0.95))
            long = rng.random() < (0.5 if needs else 0.05)
            out.append(([top - 0.05 * j for j in range(5)], needs, 3000 if long else 500))
        return out

    for target in (0.5, 0.7):
        rc = RetrievalConfidence.calibrate(sample(800), target_recall=target)
        report = rc.calibration
        assert report is not None
        assert target <= report.expected_recall <= target + 1 / (report.needs_human + 1)
        fresh = sample(6000)
        moved = np.array([rc.evaluate(s, evidence_tokens=t).should_transfer
                          for s, _, t in fresh])
        needs = np.array([n for _, n, _ in fresh])
        assert float(moved[needs].mean()) == pytest.approx(target, abs=0.06)
        assert float(moved[~needs].mean()) < 0.1  # was 0.14 and 0.37: searched without them


def test_separable_labels_get_the_middle_of_the_margin() -> None:
    rng = np.random.default_rng(5)

    def draw(n: int) -> list[tuple[list[float], bool]]:
        out = []
        for i in range(n):
            needs = i % 2 == 0
            top = float(rng.uniform(0.2, 0.5) if needs else rng.uniform(0.7, 0.95))
            out.append(([top] * 5, needs))
        return out

    sample = draw(204)
    rc = RetrievalConfidence.calibrate(sample, target_recall=0.9)
    assert rc.calibration is not None
    assert rc.calibration.recall == 1.0 and rc.calibration.false_transfer_rate == 0.0
    recall, false_rate = rates(rc, draw(4000))
    assert recall == 1.0 and false_rate == 0.0
    # the cut lies midway between the classes' nearest confidences
    conf = {n: [rc.evaluate(s).confidence for s, m in sample if m == n] for n in (True, False)}
    middle = (max(conf[True]) + min(conf[False])) / 2.0
    assert rc.config.confidence_low_threshold == pytest.approx(middle, abs=1e-6)


def test_report_matches_what_evaluate_does_on_the_sample() -> None:
    sample = synthetic(300, seed=3)
    rc = RetrievalConfidence.calibrate(sample)
    recall, false_rate = rates(rc, sample)
    assert rc.calibration is not None
    assert rc.calibration.recall == pytest.approx(recall)
    assert rc.calibration.false_transfer_rate == pytest.approx(false_rate)
    ref_recall, ref_false = rates(RetrievalConfidence(), sample)
    assert rc.calibration.reference_recall == pytest.approx(ref_recall)
    assert rc.calibration.reference_false_transfer_rate == pytest.approx(ref_false)


def test_thresholds_follow_the_embedders_scale() -> None:
    """An embedder whose scores sit 0.15 higher: the defaults miss, calibration follows."""
    shifted = synthetic(400, seed=4, shift=0.15)
    fresh = synthetic(4000, seed=5, shift=0.15)
    reference_recall, _ = rates(RetrievalConfidence(), fresh)
    assert reference_recall < 0.7
    rc = RetrievalConfidence.calibrate(shifted)
    recall, false_rate = rates(rc, fresh)
    assert recall == pytest.approx(0.9, abs=0.03) and false_rate <= 0.05
    base = RetrievalConfidence.calibrate(synthetic(400, seed=4))
    assert rc.config.score_threshold == pytest.approx(base.config.score_threshold + 0.15, abs=0.03)


def test_insufficient_and_transfer_agree_after_calibration() -> None:
    rc = RetrievalConfidence.calibrate(synthetic(400, seed=6))
    for scores, _ in synthetic(500, seed=7):
        result = rc.evaluate(scores)
        assert result.should_transfer == result.is_retrieval_insufficient


def test_hits_are_used_when_they_vary() -> None:
    """Needs-human queries retrieve few documents (a score cut-off in the retriever)."""
    rng = np.random.default_rng(8)

    def draw(n: int) -> list[tuple[list[float], bool]]:
        out = []
        for i in range(n):
            needs = i % 2 == 0
            k = int(rng.integers(1, 3)) if needs else int(rng.integers(4, 6))
            top = float(rng.uniform(0.6, 0.8))  # best scores alone do not separate
            out.append(([top] * k, needs))
        return out

    rc = RetrievalConfidence.calibrate(draw(400))
    recall, false_rate = rates(rc, draw(4000))
    # aimed at 0.9 from 200 needs-human cases: the held-out recall of one sample
    # scatters around it by a few points (sd about 0.025 here)
    assert recall >= 0.84 and false_rate <= 0.05
    assert rc.calibration is not None and rc.calibration.false_transfer_rate <= 0.01


def test_small_sample_transfers_every_needs_human_case() -> None:
    sample = synthetic(16, seed=9)  # 8 needs-human: 8 / 9 < 0.9, too few for the target
    rc = RetrievalConfidence.calibrate(sample)
    assert rc.calibration is not None
    assert rc.calibration.recall == 1.0 and not rc.calibration.guarantee_met
    assert rc.calibration.required_transfers == 8


def test_full_recall_target() -> None:
    rc = RetrievalConfidence.calibrate(synthetic(200, seed=10), target_recall=1.0)
    assert rc.calibration is not None and rc.calibration.recall == 1.0


def test_recall_is_reached_even_at_full_confidence() -> None:
    """Perfect scores clamp to confidence 1.0; only an insufficiency penalty can move them."""
    rc = RetrievalConfidence.calibrate([([1.0] * 5, True), ([1.0] * 5, False)] * 20)
    assert rc.calibration is not None and rc.calibration.recall == 1.0
    assert rc.evaluate([1.0] * 5).should_transfer


def test_scores_that_saturate_the_confidence_are_refused_not_reported_met() -> None:
    """BM25-like scores (2-25) all give confidence 1.0: no threshold transfers anything."""
    draws = np.random.default_rng(3)
    examples = [(list(draws.uniform(2, 8, 5)), True) for _ in range(50)] + \
        [(list(draws.uniform(9, 25, 5)), False) for _ in range(50)]
    with pytest.raises(ValueError, match=r"50 of them have confidence 1\.0.*relevance in "
                                         r"\[0, 1\]"):
        RetrievalConfidence.calibrate(examples)


def test_examples_without_retrieval_count_as_transferred() -> None:
    sample = [*synthetic(200, seed=11), ([], True), (None, True)]
    rc = RetrievalConfidence.calibrate(sample)
    assert rc.calibration is not None and rc.calibration.extra["no_retrieval_examples"] == 2
    assert rc.evaluate([]).should_transfer


def test_instance_calibration_keeps_its_settings() -> None:
    rc = RetrievalConfidence(locale="zh", max_evidence_tokens=500).calibrate(synthetic(200, 12))
    assert rc.locale == "zh" and rc.config.max_evidence_tokens == 500
    assert rc.config.confidence_high_threshold >= rc.config.confidence_low_threshold


def test_mapping_examples_and_labels() -> None:
    sample = [
        {"scores": s, "needs_human": int(n), "evidence_tokens": 10}
        for s, n in synthetic(100, seed=13)
    ]
    rc = RetrievalConfidence.calibrate(sample)
    assert rc.calibration is not None and rc.calibration.needs_human == 50


@pytest.mark.parametrize(
    ("examples", "match"),
    [
        ([([0.9], False), ([0.8], False)], "both needs-human and covered"),
        ([], "at least one example"),
        ([([0.9], "maybe")], "example 0: needs_human must be true or false"),
        ([([0.9], True), ([0.1, math.nan], False)], r"example 1: scores\[1\]"),
        ([([0.9],)], "example 0: expected"),
        ([{"scores": [0.9]}], "example 0: needs the keys"),
    ],
)
def test_bad_examples_are_named(examples: list[object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RetrievalConfidence.calibrate(examples)


@pytest.mark.parametrize("bad", [0.0, 1.5, -0.1, True])
def test_bad_targets(bad: float) -> None:
    with pytest.raises(ValueError, match="target_recall"):
        RetrievalConfidence.calibrate(synthetic(20, 0), target_recall=bad)
    with pytest.raises(ValueError, match="recall_confidence"):
        RetrievalConfidence.calibrate(synthetic(20, 0), recall_confidence=bad)


def test_numpy_targets_are_numbers() -> None:
    rc = RetrievalConfidence.calibrate(synthetic(100, 0), target_recall=np.float32(0.9))
    assert rc.calibration is not None
    assert rc.calibration.target_recall == pytest.approx(0.9)


def _binom_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize(("n", "t"), [(50, 0.9), (200, 0.9), (1000, 0.8), (99, 0.95)])
def test_required_rank_is_the_conformal_order_statistic(n: int, t: float) -> None:
    k = required_rank(n, t)
    assert k / (n + 1) >= t > (k - 1) / (n + 1)
    assert rank_is_guaranteed(n, t)


def test_required_rank_edges() -> None:
    assert required_rank(0, 0.9) == 0
    assert required_rank(10, 0.9) == 10 and rank_is_guaranteed(10, 0.9)
    assert required_rank(8, 0.9) == 8 and not rank_is_guaranteed(8, 0.9)
    assert required_rank(10, 1.0) == 10
    assert required_rank(1000, 0.9) == 901


@pytest.mark.parametrize(("k", "n", "c"), [(90, 100, 0.95), (181, 200, 0.9), (5, 10, 0.5)])
def test_recall_lower_bound_is_the_beta_quantile(k: int, n: int, c: float) -> None:
    bound = recall_lower_bound(k, n, c)
    # P(recall >= bound) = P(Binomial(n, bound) <= k - 1) = c
    assert _binom_cdf(k - 1, n, bound) == pytest.approx(c, abs=1e-6)
    assert bound < k / (n + 1)


def test_auroc() -> None:
    assert auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([False, False, True, True])) == 0.75
    assert auroc(np.array([1.0, 1.0]), np.array([True, False])) == 0.5
    assert auroc(np.array([1.0]), np.array([True])) is None


def test_save_load_and_name_in_config(kv_url: str) -> None:
    rc = RetrievalConfidence(locale="zh", max_evidence_tokens=None).calibrate(synthetic(300, 14))
    with Store(kv_url) as store:
        rc.save(store, "support-kb")
    with Store(kv_url) as store:
        loaded = RetrievalConfidence.load(store, "support-kb")
        assert loaded.config == rc.config
        assert loaded.config.max_evidence_tokens is None  # null survives the round trip
        assert loaded.calibration == rc.calibration
        with pytest.raises(KeyError, match="no saved hand-off calibration named 'other'"):
            RetrievalConfidence.load(store, "other")
    config = RouterConfig.model_validate(
        {
            "store": kv_url,
            "agents": ["a"],
            "handoff": {"calibration": "support-kb", "confidence_high_threshold": 0.99},
        }
    )
    with config.build_router() as router:
        assert router.transfer is not None
        named = RetrievalConfidence.from_section(router.transfer.settings, router.store)
    assert named.config.score_threshold == rc.config.score_threshold
    assert named.config.confidence_low_threshold == rc.config.confidence_low_threshold
    assert named.config.confidence_high_threshold == 0.99  # explicit setting wins
    assert named.locale == "zh"

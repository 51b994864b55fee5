"""RetrievalConfidence.evaluate at the reference formula's edges, in both locales."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from pydantic import BaseModel

from trustroute.router.config import ConfigError, load_config
from trustroute.router.handoff.confidence import RetrievalConfidence, RetrievalConfidenceConfig
from trustroute.router.handoff.messages import message

REFERENCE = {
    "score_threshold": 0.7,
    "min_hits": 1,
    "confidence_low_threshold": 0.5,
    "confidence_high_threshold": 0.8,
    "insufficient_penalty": 0.3,
    "max_evidence_tokens": 2000,
}


def test_reference_defaults() -> None:
    config = RetrievalConfidence().config
    assert {k: getattr(config, k) for k in REFERENCE} == REFERENCE
    assert config.locale == "en"


@pytest.mark.parametrize("scores", [None, [], (), np.array([])])
def test_no_retrieval_gives_0_3_and_transfers(scores: object) -> None:
    result = RetrievalConfidence().evaluate(scores, additional_factors={"boost": 5.0})
    assert result.confidence == pytest.approx(0.3)
    assert result.should_transfer and result.is_retrieval_insufficient
    assert result.transfer_reason == "No documents were retrieved; handing over to a human agent."
    assert result.reasons == ("no_retrieval",)
    assert result.diagnostics["no_retrieval"] is True and result.diagnostics["hits"] == 0


def test_one_hit_below_threshold() -> None:
    result = RetrievalConfidence().evaluate([0.6])
    # 0.7 * 0.6 + 0.3 * (1 / 5) - 0.3 = 0.18
    assert result.confidence == pytest.approx(0.18)
    assert result.is_retrieval_insufficient and result.should_transfer
    assert result.reasons == ("low_score", "low_confidence")
    assert result.transfer_reason == (
        "Retrieval insufficient (best score 0.600 is below the threshold 0.700); confidence 0.18."
    )
    d = result.diagnostics
    assert d["score_component"] == pytest.approx(0.42)
    assert d["hits_component"] == pytest.approx(0.06)
    assert d["penalty_applied"] == pytest.approx(0.3)
    assert d["raw_confidence"] == pytest.approx(0.18)
    assert d["insufficient_reasons"] == ["low_score"]


def test_one_hit_above_threshold_answers_without_a_note() -> None:
    result = RetrievalConfidence().evaluate([0.9])
    assert result.confidence == pytest.approx(0.7 * 0.9 + 0.3 * 0.2)
    assert not result.should_transfer and not result.is_retrieval_insufficient
    assert result.transfer_reason is None and result.level == "medium"


def test_score_exactly_at_threshold_is_sufficient() -> None:
    result = RetrievalConfidence().evaluate([0.7, 0.5])
    assert not result.is_retrieval_insufficient
    assert result.confidence == pytest.approx(0.49 + 0.12)


def test_hits_saturate_at_five() -> None:
    rc = RetrievalConfidence()
    five = rc.evaluate([0.8] * 5).confidence
    assert five == pytest.approx(0.56 + 0.3)
    assert rc.evaluate([0.8] * 9).confidence == pytest.approx(five)
    assert rc.evaluate([0.8] * 3).confidence == pytest.approx(0.56 + 0.3 * 0.6)


def test_token_overflow_is_insufficient_and_notes_inaccuracy() -> None:
    rc = RetrievalConfidence()
    at_limit = rc.evaluate([0.9] * 5, evidence_tokens=2000)
    assert not at_limit.is_retrieval_insufficient
    over = rc.evaluate([0.9] * 5, evidence_tokens=2001)
    assert over.is_retrieval_insufficient and over.reasons[0] == "token_overflow"
    assert over.confidence == pytest.approx(0.63 + 0.3 - 0.3)
    # answered (0.63 >= 0.5) but below the high threshold 0.8: the note says why
    assert not over.should_transfer
    assert over.transfer_reason == (
        "The answer may be inaccurate: retrieval insufficient (evidence of 2001 tokens "
        "exceeds the limit of 2000); confidence 0.63."
    )
    # per-document token counts are added up
    assert rc.evaluate([0.9] * 5, evidence_tokens=[1500, 600]).is_retrieval_insufficient


def test_every_insufficiency_reason_is_listed_in_order() -> None:
    rc = RetrievalConfidence(min_hits=3)
    result = rc.evaluate([0.5, 0.4], evidence_tokens=5000)
    assert result.diagnostics["insufficient_reasons"] == [
        "too_few_hits",
        "low_score",
        "token_overflow",
    ]
    reason = result.transfer_reason or ""
    assert "2 hit(s), fewer than the minimum of 3" in reason
    assert "best score 0.500 is below the threshold 0.700" in reason
    assert "evidence of 5000 tokens exceeds the limit of 2000" in reason


def test_low_confidence_without_insufficiency() -> None:
    rc = RetrievalConfidence(score_threshold=0.2)
    result = rc.evaluate([0.3])  # sufficient, but 0.21 + 0.06 = 0.27 < 0.5
    assert not result.is_retrieval_insufficient and result.should_transfer
    assert result.transfer_reason == "Confidence 0.27 is below the transfer threshold 0.50."


def test_additional_factors_add_a_tenth_each() -> None:
    rc = RetrievalConfidence()
    base = rc.evaluate([0.9] * 5).confidence
    result = rc.evaluate([0.9] * 5, additional_factors={"fresh": 0.5, "ambiguous": -1.0})
    assert result.confidence == pytest.approx(base + 0.05 - 0.1)
    assert result.diagnostics["factor_contributions"] == {
        "fresh": pytest.approx(0.05),
        "ambiguous": pytest.approx(-0.1),
    }
    assert result.diagnostics["factor_total"] == pytest.approx(-0.05)
    listed = rc.evaluate([0.9] * 5, additional_factors=[0.5, -1.0])
    assert listed.confidence == pytest.approx(result.confidence)
    # a factor can lift a borderline case over the transfer threshold
    assert rc.evaluate([0.6]).should_transfer
    assert not rc.evaluate([0.6], additional_factors={"exact_match": 4.0}).should_transfer


def test_clamping_both_ends() -> None:
    rc = RetrievalConfidence()
    high = rc.evaluate([1.0] * 5, additional_factors={"x": 3.0})
    assert high.confidence == 1.0 and high.diagnostics["raw_confidence"] == pytest.approx(1.3)
    assert high.diagnostics["clamped"] is True and high.level == "high"
    low = rc.evaluate([0.0], additional_factors=[-2.0])
    assert low.confidence == 0.0 and low.diagnostics["raw_confidence"] < 0
    assert low.should_transfer


def test_confidence_equal_to_low_threshold_does_not_transfer() -> None:
    rc = RetrievalConfidence(confidence_low_threshold=1.0, confidence_high_threshold=1.0)
    assert not rc.evaluate([1.0] * 5).should_transfer


def test_chinese_reasons() -> None:
    rc = RetrievalConfidence(locale="zh")
    assert rc.evaluate([]).transfer_reason == "未检索到任何相关文档，转接人工客服。"
    low = rc.evaluate([0.6]).transfer_reason or ""
    assert low.startswith("检索结果不足（") and "最高相关度 0.600 低于阈值 0.700" in low
    note = rc.evaluate([0.9] * 5, evidence_tokens=3000).transfer_reason or ""
    assert note.startswith("答案可能不准确") and "超过上限 2000" in note
    plain = RetrievalConfidence({"locale": "zh_CN", "score_threshold": 0.2}).evaluate([0.3])
    assert plain.transfer_reason == "置信度 0.27 低于转人工阈值 0.50。"


def test_unknown_locale_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"locale 'fr'.*available: en, zh"):
        RetrievalConfidence(locale="fr")


@dataclass
class _DataclassConfig:
    score_threshold: float = 0.5
    min_hits: int = 2


class _OtherModel(BaseModel):
    score_threshold: float = 0.4
    confidence_low_threshold: float = 0.3


class _Plain:
    score_threshold = 0.45


def test_config_forms() -> None:
    assert RetrievalConfidence({"score_threshold": 0.5}).config.score_threshold == 0.5
    assert RetrievalConfidence(config={"min_hits": 2}).config.min_hits == 2
    assert RetrievalConfidence(score_threshold=0.55).config.score_threshold == 0.55
    model = RetrievalConfidenceConfig(score_threshold=0.6)
    assert RetrievalConfidence(model).config is model
    assert RetrievalConfidence(_DataclassConfig()).config.min_hits == 2
    assert RetrievalConfidence(_OtherModel()).config.confidence_low_threshold == 0.3
    assert RetrievalConfidence(_Plain()).config.score_threshold == 0.45
    # keyword overrides win over the mapping
    assert RetrievalConfidence({"min_hits": 2}, min_hits=4).config.min_hits == 4


def test_unknown_config_keys_warn_and_are_ignored() -> None:
    with pytest.warns(UserWarning, match="enable_rerank"):
        rc = RetrievalConfidence({"score_threshold": 0.6, "enable_rerank": True})
    assert rc.config.score_threshold == 0.6
    with pytest.warns(UserWarning, match=r"ignores unknown config key\(s\): score_treshold "
                                         r"\(did you mean 'score_threshold'\?\)$"):
        RetrievalConfidence({"score_treshold": 0.6})  # a typo: ignored, with a hint


@pytest.mark.parametrize(
    "bad",
    [
        {"min_hits": -1},
        {"confidence_low_threshold": 1.5},
        {"confidence_low_threshold": 0.9, "confidence_high_threshold": 0.8},
        {"score_threshold": float("nan")},
    ],
)
def test_invalid_config_is_rejected(bad: dict[str, float]) -> None:
    with warnings.catch_warnings(), pytest.raises(ValueError):
        RetrievalConfidence(bad)


def test_score_shapes() -> None:
    rc = RetrievalConfidence()
    expected = rc.evaluate([0.8, 0.6]).confidence
    doc = Document(page_content="x")
    assert rc.evaluate([(doc, 0.8), (doc, 0.6)]).confidence == expected
    assert rc.evaluate([{"score": 0.8}, {"relevance_score": 0.6}]).confidence == expected
    scored = [Document(page_content="a", metadata={"score": s}) for s in (0.8, 0.6)]
    assert rc.evaluate(scored).confidence == expected
    assert rc.evaluate(np.array([0.8, 0.6], dtype=np.float32)).confidence == pytest.approx(expected)
    assert rc.evaluate(0.8).diagnostics["hits"] == 1


@pytest.mark.parametrize(
    ("scores", "match"),
    [
        ([0.5, float("nan")], r"scores\[1\] must be a finite number"),
        ([0.5, "high"], r"scores\[1\] must be a number"),
        ([True], r"scores\[0\] must be a number"),
        ("0.5", "scores must be a list"),
        # one query's row as FAISS returns it, (1, k): its worst score was read as the only
        (np.array([[0.91, 0.88, 0.52]]), r"one-dimensional, got an array of shape \(1, 3\)"),
        ([[0.91, 0.88, 0.52]], r"scores\[0\] holds 3 values, not a \(document, score\)"),
    ],
)
def test_bad_scores_name_the_position(scores: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RetrievalConfidence().evaluate(scores)


def test_bad_tokens_and_factors() -> None:
    rc = RetrievalConfidence()
    with pytest.raises(ValueError, match="evidence_tokens must be >= 0"):
        rc.evaluate([0.9], evidence_tokens=-1)
    with pytest.raises(ValueError, match=r"additional_factors\['x'\] must be a finite"):
        rc.evaluate([0.9], additional_factors={"x": math.inf})


def test_result_is_json_ready() -> None:
    data = RetrievalConfidence().evaluate([0.6], evidence_tokens=10).as_dict()
    assert set(data) >= {
        "confidence",
        "should_transfer",
        "transfer_reason",
        "is_retrieval_insufficient",
        "diagnostics",
    }


@settings(max_examples=200)
@given(
    scores=st.lists(st.floats(-1.0, 1.0), max_size=8),
    tokens=st.none() | st.integers(0, 5000),
    factors=st.lists(st.floats(-3.0, 3.0), max_size=3),
    threshold=st.floats(0.0, 1.0),
)
def test_invariants(
    scores: list[float], tokens: int | None, factors: list[float], threshold: float
) -> None:
    rc = RetrievalConfidence(score_threshold=threshold)
    result = rc.evaluate(scores, evidence_tokens=tokens, additional_factors=factors)
    assert 0.0 <= result.confidence <= 1.0
    assert result.should_transfer == (result.confidence < 0.5)
    assert result.is_retrieval_insufficient == bool(result.diagnostics["insufficient_reasons"])
    assert (result.transfer_reason is not None) >= result.should_transfer
    if scores:
        d = result.diagnostics
        raw = d["score_component"] + d["hits_component"] - d["penalty_applied"]
        assert d["raw_confidence"] == pytest.approx(raw + d["factor_total"])
        assert result.confidence == pytest.approx(min(1.0, max(0.0, d["raw_confidence"])))


def test_thresholds_that_contradict_each_other_are_one_line_naming_both(
        tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        RetrievalConfidence(confidence_low_threshold=0.9)  # above the default high, 0.8
    assert str(caught.value) == ("confidence_high_threshold (0.8) must not be below "
                                 "confidence_low_threshold (0.9)")
    config = tmp_path / "router.yaml"
    config.write_text("store: mem://\nhandoff: {confidence_low_threshold: 0.9}\n")
    with pytest.raises(ConfigError) as caught:  # at load, not at the first hand-off
        load_config(config)
    assert str(caught.value).endswith("router.yaml: handoff: confidence_high_threshold (0.8, "
                                      "the default) must not be below "
                                      "confidence_low_threshold (0.9)")


def test_compared_numbers_show_the_digits_that_tell_them_apart() -> None:
    assert message("low_confidence", None, confidence=0.497, threshold=0.5) == \
        "Confidence 0.497 is below the transfer threshold 0.500."
    assert message("low_confidence", None, confidence=0.3, threshold=0.5) == \
        "Confidence 0.30 is below the transfer threshold 0.50."
    assert "0.5459 is below the threshold 0.5461" in message(
        "low_score", None, max_score=0.54592, score_threshold=0.54605)

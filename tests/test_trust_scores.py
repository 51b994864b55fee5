"""Composite trust math at the reference values (router.trust.scores)."""

from __future__ import annotations

import math

import pytest

from trustroute.profiles.trust_counts import TrustCounts
from trustroute.router.stats import wilson_lower_bound
from trustroute.router.trust.decay import DecaySettings, decay_once
from trustroute.router.trust.scores import (
    Tier,
    composite_confidence,
    effectiveness_score,
    frequency_score,
    human_score,
    outcome_kind,
    reference_human_score,
    tier_for,
    trust_scores,
)


@pytest.mark.parametrize(("observations", "expected"), [
    (0, 0.30), (1, 0.30), (2, 0.30),
    (3, 0.50), (5, 0.50),
    (6, 0.70), (10, 0.70),
    (11, 0.85), (20, 0.85),
    (21, 0.95), (1000, 0.95),
])
def test_frequency_bands_at_every_edge(observations: int, expected: float) -> None:
    assert frequency_score(observations, 0) == pytest.approx(expected)


def test_frequency_loses_a_tenth_per_contradiction_and_floors_at_zero() -> None:
    assert frequency_score(21, 1) == pytest.approx(0.85)
    assert frequency_score(21, 3) == pytest.approx(0.65)
    assert frequency_score(6, 7) == 0.0
    assert frequency_score(1, 3) == 0.0


@pytest.mark.parametrize(("positive", "negative", "neutral", "expected"), [
    (1, 0, 0, 0.206543),  # published Wilson 95% lower bounds
    (5, 0, 0, 0.565509),
    (8, 2, 0, 0.490157),
    (9, 1, 0, 0.595844),
    (1, 1, 0, 0.094529),
    (2, 1, 0, 0.207655),
    (3, 1, 0, 0.300636),
    (0, 4, 0, 0.0),
    (8, 0, 2, 0.490157),  # neutral runs count in the total, not as positive
])
def test_effectiveness_is_the_wilson_lower_bound(positive: int, negative: int, neutral: int,
                                                 expected: float) -> None:
    assert effectiveness_score(positive, negative, neutral) == pytest.approx(expected, abs=1e-6)


def test_effectiveness_without_data_is_one_half_and_stays_in_unit_interval() -> None:
    assert effectiveness_score(0, 0, 0) == 0.5
    assert 0.0 <= effectiveness_score(10_000, 0) <= 1.0
    assert effectiveness_score(10_000, 0) > 0.999
    assert wilson_lower_bound(0, 0) == 0.0


def test_reference_human_score_sequence() -> None:
    assert reference_human_score(0, 0) == 0.5
    assert reference_human_score(1, 0) == pytest.approx(0.575)
    assert reference_human_score(2, 0) == pytest.approx(0.63875)
    assert reference_human_score(2, 1) == pytest.approx(0.5429375, abs=1e-12)
    assert reference_human_score(0, 1) == pytest.approx(0.425)
    assert reference_human_score(0, 2) == pytest.approx(0.36125)


def test_human_score_follows_the_reference_while_verdicts_are_few() -> None:
    # the reference has the most say: each verdict moves the score its way, and the
    # score stays between the reference and the approval rate's cautious lower bound
    assert human_score(0, 0) == 0.5
    for a, r in ((1, 0), (0, 1), (2, 0), (2, 1), (0, 2), (1, 2), (3, 3)):
        n = a + r
        bound = wilson_lower_bound(a / n, n)
        low, high = sorted((bound, reference_human_score(a, r)))
        assert low < human_score(a, r) < high
        assert abs(human_score(a, r) - reference_human_score(a, r)) < 0.15
    assert human_score(1, 0) > 0.5 > human_score(0, 1)
    assert abs(human_score(1, 0) - 0.575) < 0.06 and abs(human_score(0, 1) - 0.425) < 0.07


def test_a_few_verdicts_move_the_score_down_more_readily_than_up() -> None:
    # trust is earned by what the verdicts show with 95% confidence (as effectiveness)
    assert human_score(1, 0) - 0.5 < 0.5 - human_score(0, 1)
    assert human_score(0, 2) <= 0.3 and human_score(1, 3) <= 0.3
    assert human_score(3, 3) <= 0.3  # half approved, on six verdicts: not yet trusted


def test_human_score_reflects_the_approval_rate_at_volume() -> None:
    # the reference collapses (both below 0.05); the score tends to the approval rate
    assert reference_human_score(180, 20) < 0.05 and reference_human_score(40, 160) < 0.05
    assert human_score(180, 20) >= 0.8
    assert human_score(40, 160) <= 0.3
    assert 0.86 < human_score(900, 100) < 0.9  # from below, as the bound tightens
    assert human_score(9000, 1000) == pytest.approx(0.9, abs=0.01)


def test_the_reference_collapse_does_not_leak_in_at_moderate_volume() -> None:
    # 32 of 40 approved: the reference has fallen to 0.27; the score is the rate's bound
    assert reference_human_score(32, 8) < 0.3
    assert human_score(32, 8) == pytest.approx(wilson_lower_bound(0.8, 40), abs=1e-3)


def test_human_score_moves_the_right_way_with_every_verdict() -> None:
    for a in range(40):
        for r in range(40):
            assert human_score(a + 1, r) > human_score(a, r)
            assert human_score(a, r + 1) < human_score(a, r)


def test_human_score_explicit_review_pins_095() -> None:
    assert human_score(0, 0, reviewed=True) == 0.95
    assert human_score(3, 5, reviewed=True) == 0.95


def test_human_score_many_steps_match_step_by_step() -> None:
    s = 0.5
    for _ in range(150):
        s += 0.15 * (1 - s)
    for _ in range(90):
        s -= 0.15 * s
    assert reference_human_score(150, 90) == pytest.approx(s, rel=1e-9)


def test_composite_weighted_sum_without_penalty() -> None:
    assert composite_confidence(0.5, 0.5, 0.5) == pytest.approx(0.5)
    assert composite_confidence(0.95, 0.8, 0.95) == pytest.approx(
        0.35 * 0.95 + 0.40 * 0.8 + 0.25 * 0.95)
    assert composite_confidence(0.2, 0.2, 0.2) == pytest.approx(0.2)  # 0.2 is not "below"


def test_composite_penalty_when_any_dimension_below_02() -> None:
    assert composite_confidence(0.1, 0.9, 0.9) == pytest.approx(
        0.7 * (0.35 * 0.1 + 0.40 * 0.9 + 0.25 * 0.9))
    assert composite_confidence(0.9, 0.19, 0.9) == pytest.approx(
        0.7 * (0.35 * 0.9 + 0.40 * 0.19 + 0.25 * 0.9))
    assert composite_confidence(0.9, 0.9, 0.0) == pytest.approx(
        0.7 * (0.35 * 0.9 + 0.40 * 0.9))


def test_composite_custom_weights_and_clamp() -> None:
    assert composite_confidence(1.0, 0.0, 0.0, weights=(1.0, 0.0, 0.0)) == pytest.approx(0.7)
    assert composite_confidence(1.0, 1.0, 1.0, weights=(1.0, 1.0, 1.0)) == 1.0
    assert composite_confidence(0.0, 0.0, 0.0) == 0.0


@pytest.mark.parametrize(("composite", "tier"), [
    (1.0, Tier.CORE), (0.8, Tier.CORE),
    (0.7999, Tier.STRONG), (0.6, Tier.STRONG),
    (0.5999, Tier.MODERATE), (0.4, Tier.MODERATE),
    (0.3999, Tier.TENTATIVE), (0.2, Tier.TENTATIVE),
    (0.1999, Tier.DEPRECATED), (0.0, Tier.DEPRECATED),
])
def test_tier_edges(composite: float, tier: Tier) -> None:
    assert tier_for(composite) == tier
    assert tier_for(composite) == str(tier)  # compares equal to its name


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan])
def test_bad_scores_are_rejected_with_the_name(bad: float) -> None:
    with pytest.raises(ValueError, match="composite"):
        tier_for(bad)
    with pytest.raises(ValueError, match="human"):
        composite_confidence(0.5, 0.5, bad)


def test_bad_counts_are_rejected_with_the_name() -> None:
    with pytest.raises(ValueError, match="observations"):
        frequency_score(-1)
    with pytest.raises(TypeError, match="negative"):
        effectiveness_score(1, 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="weights"):
        composite_confidence(0.5, 0.5, 0.5, weights=(0.5, -0.1, 0.6))


def test_new_profile_starts_moderate() -> None:
    scores = trust_scores(TrustCounts())
    assert scores.tier == Tier.MODERATE
    assert scores.composite == pytest.approx(0.35 * 0.3 + 0.40 * 0.5 + 0.25 * 0.5)


def test_counts_scores_subtract_decay_offsets_floored_at_zero() -> None:
    counts = TrustCounts(observations=25, positive=25, frequency_decay=0.02,
                         effectiveness_decay=0.01, human_decay=0.9)
    f, e, h, c, tier = trust_scores(counts)
    assert f == pytest.approx(0.93)
    assert e == pytest.approx(effectiveness_score(25, 0) - 0.01)
    assert h == 0.0
    assert c == pytest.approx(0.7 * (0.35 * f + 0.40 * e))
    assert tier == tier_for(c)


@pytest.mark.parametrize(("success", "quality", "kind"), [
    (True, 1.0, "positive"), (True, 0.5, "positive"), (True, 0.49, "neutral"),
    (False, 0.9, "negative"), (False, 0.0, "negative"),
])
def test_outcome_kind(success: bool, quality: float, kind: str) -> None:
    assert outcome_kind(success, quality) == kind


def test_scores_are_decimals_so_an_edge_on_paper_is_the_edge() -> None:
    # 0.3 - 0.1 is 0.19999999999999998 in binary floats: below 0.2, it took the x0.7
    assert frequency_score(4, 3) == 0.2 and frequency_score(1, 1) == 0.2
    weak = composite_confidence(0.19999999999999998, 0.5, 0.5)
    assert composite_confidence(frequency_score(1, 1), 0.5, 0.5) > weak
    decayed = TrustCounts(observations=1)
    for _ in range(5):  # 0.3 - 5 x 0.02 = 0.2
        decayed = decay_once(decayed, DecaySettings())
    assert trust_scores(decayed).frequency == 0.2

"""The shared statistics (trustroute.router.stats) against scipy and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, roc_auc_score

from trustroute.router.stats import (
    auroc,
    binomial_cdf,
    brier_score,
    expected_calibration_error,
    wilson_lower_bound,
)

Z = float(sps.norm.ppf(0.975))


def scipy_wilson(successes: int, total: int) -> float:
    ci = sps.binomtest(successes, total).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low)


@pytest.mark.parametrize("total", [1, 2, 3, 7, 10, 50, 1000])
def test_wilson_matches_scipy_for_every_count(total: int) -> None:
    for successes in range(total + 1) if total <= 50 else (0, 1, 500, 999, 1000):
        ours = wilson_lower_bound(successes / total, total, Z)
        assert isinstance(ours, float)
        assert ours == pytest.approx(scipy_wilson(successes, total), abs=1e-12)


def test_wilson_on_arrays_is_elementwise() -> None:
    totals = np.array([1.0, 4.0, 10.0, 200.0, 0.0])
    successes = np.array([1.0, 3.0, 8.0, 20.0, 0.0])
    props = np.divide(successes, totals, out=np.zeros(5), where=totals > 0)
    bounds = wilson_lower_bound(props, totals, Z)
    assert isinstance(bounds, np.ndarray) and bounds.shape == (5,)
    expected = [scipy_wilson(int(s), int(t)) for s, t in zip(successes[:4], totals[:4],
                                                                 strict=True)]
    assert bounds[:4] == pytest.approx(expected, abs=1e-12)
    assert bounds[4] == 0.0  # no trials: no evidence of anything
    # a scalar proportion against an array of counts broadcasts
    assert wilson_lower_bound(0.8, np.array([10.0, 100.0]), Z) == pytest.approx(
        [scipy_wilson(8, 10), scipy_wilson(80, 100)], abs=1e-12)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1e6), st.floats(0.0, 5.0))
def test_wilson_stays_between_zero_and_the_proportion(p: float, n: float, z: float) -> None:
    bound = wilson_lower_bound(p, n, z)
    assert 0.0 <= bound <= p + 1e-12
    assert wilson_lower_bound(np.array([p]), np.array([n]), z)[0] == pytest.approx(bound)


def test_wilson_tightens_with_evidence_and_widens_with_z() -> None:
    assert wilson_lower_bound(0.8, 10.0) < wilson_lower_bound(0.8, 100.0) < 0.8
    assert wilson_lower_bound(0.8, 10.0, z=2.58) < wilson_lower_bound(0.8, 10.0)
    assert wilson_lower_bound(0.5, 0.0) == 0.0
    assert wilson_lower_bound(0.5, -3.0) == 0.0


@pytest.mark.parametrize(("n", "p"), [(0, 0.3), (1, 0.5), (10, 0.9), (200, 0.9),
                                      (1000, 0.8), (5000, 0.999), (3000, 0.001)])
def test_binomial_cdf_matches_scipy(n: int, p: float) -> None:
    ours = binomial_cdf(n, p)
    assert ours.shape == (n + 1,)
    assert ours == pytest.approx(sps.binom.cdf(np.arange(n + 1), n, p), abs=1e-9)
    assert ours[-1] == 1.0


def test_binomial_cdf_at_certain_outcomes_and_bad_arguments() -> None:
    assert binomial_cdf(4, 0.0).tolist() == [1.0] * 5
    assert binomial_cdf(4, 1.0).tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="p must"):
        binomial_cdf(4, 1.5)
    with pytest.raises(ValueError, match="n must"):
        binomial_cdf(-1, 0.5)


@pytest.mark.parametrize("seed", range(6))
def test_auroc_matches_scikit_learn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    positive = rng.random(n) < 0.3
    positive[0], positive[1] = True, False  # both classes present
    # rounded scores so that ties are common
    scores = np.round(rng.random(n) + 0.5 * positive, 1 if seed % 2 else 6)
    assert auroc(scores, positive) == pytest.approx(roc_auc_score(positive, scores), abs=1e-12)


def test_auroc_ties_and_empty_classes() -> None:
    assert auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([False, False, True, True])) == 0.75
    assert auroc([1.0, 1.0], [True, False]) == 0.5
    assert auroc([2.0, 1.0], [True, False]) == 1.0
    assert auroc([1.0], [True]) is None
    assert auroc([1.0, 2.0], [False, False]) is None
    with pytest.raises(ValueError, match="length"):
        auroc([1.0, 2.0], [True])


@pytest.mark.parametrize(("seed", "buckets"), [(0, 10), (1, 10), (2, 5), (3, 15), (4, 1)])
def test_ece_matches_scikit_learn_reliability_curve(seed: int, buckets: int) -> None:
    rng = np.random.default_rng(seed)
    predicted = rng.random(500)
    outcomes = rng.random(500) < predicted**1.5  # over-confident on purpose
    realised, mean_predicted = calibration_curve(outcomes, predicted, n_bins=buckets)
    counts, _ = np.histogram(predicted, bins=np.linspace(0.0, 1.0, buckets + 1))
    counts = counts[counts > 0]
    expected = float((counts * np.abs(realised - mean_predicted)).sum() / counts.sum())
    ours = expected_calibration_error(predicted.tolist(), outcomes.tolist(), buckets)
    assert ours == pytest.approx(expected, abs=1e-12)
    assert ours > 0.0


def test_ece_by_hand_and_edges() -> None:
    preds = [0.9, 0.9, 0.9, 0.9, 0.2, 0.2]
    outs = [True, True, True, False, False, True]
    assert expected_calibration_error(preds, outs) == pytest.approx((4 * 0.15 + 2 * 0.3) / 6)
    assert expected_calibration_error([1.0, 0.95], [True, True]) == pytest.approx(0.025)
    assert expected_calibration_error([], []) == 0.0
    with pytest.raises(ValueError, match="buckets"):
        expected_calibration_error(preds, outs, buckets=0)


@settings(max_examples=50)
@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.booleans()), min_size=1, max_size=40))
def test_brier_matches_scikit_learn(pairs: list[tuple[float, bool]]) -> None:
    preds = [p for p, _ in pairs]
    outs = [o for _, o in pairs]
    expected = float(np.mean([(p - o) ** 2 for p, o in pairs]))  # one class may be absent
    if len(set(outs)) == 2:
        expected = float(brier_score_loss(outs, preds))
    assert brier_score(preds, outs) == pytest.approx(expected, abs=1e-12)


def test_metrics_reject_bad_input() -> None:
    assert brier_score([], []) == 0.0
    with pytest.raises(ValueError, match="length"):
        brier_score([0.5], [])
    with pytest.raises(ValueError, match="predicted must be a probability"):
        brier_score([1.5], [True])
    with pytest.raises(ValueError, match="predicted must be a probability"):
        expected_calibration_error([float("nan")], [True])

"""The calibration map and the calibration metrics (profiles.calibration)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from trustroute.router.stats import brier_score, expected_calibration_error
from trustroute.router.trust.calibration import (
    CalibrationMap,
    CalibrationSettings,
    calibration_report,
    reliability_table,
)


def test_identity_until_enough_data() -> None:
    cmap = CalibrationMap()
    assert cmap.is_identity
    for p in (0.0, 0.05, 0.33, 0.5, 0.77, 1.0):
        assert cmap(p) == pytest.approx(p)
    for _ in range(9):  # below min_count
        cmap.update(0.85, False)
    assert cmap.is_identity
    assert cmap(0.85) == pytest.approx(0.85)


def test_over_confident_bucket_is_pulled_toward_realised_rate_with_shrinkage() -> None:
    cmap = CalibrationMap(CalibrationSettings(horizon=0))
    outcomes = [i % 5 < 3 for i in range(200)]  # 60% success at a stated 85%
    for ok in outcomes:
        cmap.update(0.85, ok)
    expected = 0.85 + 200 / (200 + 20.0) * (0.6 - 0.85)  # 20 pseudo-observations at identity
    assert cmap(0.85) == pytest.approx(expected)
    assert cmap.buckets()[8][0] == pytest.approx(200)


def test_map_is_continuous_across_bucket_edges() -> None:
    cmap = CalibrationMap(CalibrationSettings(horizon=0))
    rng = np.random.default_rng(1)
    for _ in range(3000):
        p = float(rng.uniform(0.5, 1.0))
        cmap.update(p, bool(rng.random() < p - 0.2))
    left, right = cmap(0.7 - 1e-9), cmap(0.7 + 1e-9)
    assert abs(left - right) < 1e-6
    grid = [cmap(x) for x in np.linspace(0.55, 0.95, 81)]
    assert max(abs(a - b) for a, b in itertools.pairwise(grid)) < 0.02


def test_learned_map_reduces_calibration_error_on_fresh_data() -> None:
    rng = np.random.default_rng(2)

    def truth(p: float) -> float:
        return p * p  # over-confident everywhere but at 0 and 1

    cmap = CalibrationMap(CalibrationSettings(horizon=0))
    for _ in range(4000):
        p = float(rng.random())
        cmap.update(p, bool(rng.random() < truth(p)))
    test = rng.random(4000)
    outcomes = [bool(rng.random() < truth(p)) for p in test]
    raw_ece = expected_calibration_error(test.tolist(), outcomes)
    cal_ece = expected_calibration_error([cmap(float(p)) for p in test], outcomes)
    assert raw_ece > 0.1
    assert cal_ece < 0.04


def test_forgetting_follows_a_change() -> None:
    cmap = CalibrationMap(CalibrationSettings(horizon=200))
    for _ in range(1000):
        cmap.update(0.8, True)
    for _ in range(1000):
        cmap.update(0.8, False)
    assert cmap(0.8) < 0.2  # the old successes are forgotten
    never = CalibrationMap(CalibrationSettings(horizon=0))
    for ok in [True] * 1000 + [False] * 1000:
        never.update(0.8, ok)
    assert 0.45 < never(0.8) < 0.55


def test_state_round_trip_and_mismatch() -> None:
    cmap = CalibrationMap()
    for i in range(100):
        cmap.update(0.65, i % 3 == 0)
    copy = CalibrationMap()
    assert copy.load_state(cmap.state())
    assert copy(0.65) == pytest.approx(cmap(0.65))
    other = CalibrationMap(CalibrationSettings(buckets=5))
    assert not other.load_state(cmap.state())
    assert other.is_identity
    assert not copy.load_state({"n": "garbage"})


def test_bad_prediction_is_rejected() -> None:
    with pytest.raises(ValueError, match="predicted"):
        CalibrationMap().update(1.5, True)
    with pytest.raises(ValueError, match="horizon"):
        CalibrationSettings(horizon=0.5)


def test_metrics_by_hand() -> None:
    preds = [0.9, 0.9, 0.9, 0.9, 0.2, 0.2]
    outs = [True, True, True, False, False, True]
    assert brier_score(preds, outs) == pytest.approx(
        (3 * 0.01 + 0.81 + 0.04 + 0.64) / 6)
    table = reliability_table(preds, outs)
    assert [(r.label, r.count) for r in table] == [("0.2-0.3", 2), ("0.9-1.0", 4)]
    assert table[1].realised == pytest.approx(0.75)
    assert expected_calibration_error(preds, outs) == pytest.approx(
        (4 * 0.15 + 2 * 0.3) / 6)
    assert expected_calibration_error([], []) == 0.0
    with pytest.raises(ValueError, match="length"):
        brier_score([0.5], [])


def test_report_counts_abstentions_and_their_failures() -> None:
    rows = [(0.9, True, False), (0.8, False, False), (0.3, False, True), (0.4, True, True),
            (0.2, False, True), (0.5, None, True)]
    report = calibration_report(rows)
    assert report.decisions == 6
    assert report.with_outcome == 5
    assert report.abstention_rate == pytest.approx(4 / 6)
    assert report.abstained_failure_rate == pytest.approx(2 / 3)
    assert report.answered_failure_rate == pytest.approx(1 / 2)
    assert report.as_dict()["reliability"][0]["bucket"] == "0.2-0.3"

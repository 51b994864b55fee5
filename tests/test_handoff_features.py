"""The feature candidates the BANKING77 benchmark measures beside the calibrated rule.

They must be a fair comparison: aimed at the same target recall with the same conformal
correction (so their held-out recall is near the target, as the library's is), perfect on
separable labels as the library is, and rejecting bad input in one line.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.handoff_features import LogisticRule, conformal_cut, features, matched_false_rate
from trustroute import RetrievalConfidence


def _world(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-5 scores where the gap between the first two also tells the classes apart."""
    needs = rng.random(n) < 0.3
    top = np.where(needs, rng.normal(0.55, 0.08, n), rng.normal(0.68, 0.08, n))
    gap = np.where(needs, rng.exponential(0.01, n), rng.exponential(0.06, n))
    rest = top[:, None] - gap[:, None] - np.cumsum(rng.exponential(0.02, (n, 4)), axis=1)
    agree = np.where(needs, rng.integers(1, 5, n), rng.integers(2, 6, n)) / 5.0
    return np.column_stack([top, rest]), agree, needs


def test_candidates_aim_at_the_target_recall_on_new_queries() -> None:
    rng = np.random.default_rng(7)
    recalls = []
    for _ in range(20):
        cal_scores, cal_agree, cal_needs = _world(rng, 500)
        new_scores, new_agree, new_needs = _world(rng, 4000)
        rule = LogisticRule.fit(features(cal_scores, cal_agree), cal_needs, 0.9)
        moved = rule.transfers(features(new_scores, new_agree))
        recalls.append(moved[new_needs].mean())
    assert abs(np.mean(recalls) - 0.9) < 0.02


def test_gap_and_agreement_help_where_they_carry_information() -> None:
    rng = np.random.default_rng(3)
    cal_scores, cal_agree, cal_needs = _world(rng, 800)
    new_scores, new_agree, new_needs = _world(rng, 8000)
    rule = LogisticRule.fit(features(cal_scores, cal_agree), cal_needs, 0.9)
    combined = matched_false_rate(rule.score(features(new_scores, new_agree)), new_needs, 0.9)
    examples = [(s.tolist(), bool(n)) for s, n in zip(cal_scores, cal_needs, strict=True)]
    rc = RetrievalConfidence.calibrate(examples, target_recall=0.9)
    conf = np.array([rc.evaluate(s.tolist()).confidence for s in new_scores])
    top_only = matched_false_rate(conf, new_needs, 0.9)
    assert combined < top_only / 2


def test_separable_labels_get_every_needs_human_case_and_no_covered_one() -> None:
    rng = np.random.default_rng(1)
    needs = np.arange(200) < 60
    top = np.where(needs, rng.uniform(0.2, 0.4, 200), rng.uniform(0.6, 0.9, 200))
    scores = np.column_stack([top, top - 0.05, top - 0.1])
    rule = LogisticRule.fit(features(scores), needs, 0.9)
    moved = rule.transfers(features(scores))
    assert moved[needs].all() and not moved[~needs].any()
    middle = (top[needs].max() + top[~needs].min()) / 2
    assert conformal_cut(top, needs, 0.9) == pytest.approx(middle)


def test_bad_input_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"2-D array with >= 2 hits") as info:
        features(np.array([0.5, 0.4]))
    assert "\n" not in str(info.value)
    x = features(np.array([[0.5, 0.4], [0.6, 0.3]]))
    with pytest.raises(ValueError, match="both needs-human and covered"):
        LogisticRule.fit(x, np.array([True, True]), 0.9)

"""The multi-task-type GLR change-point test."""

from __future__ import annotations

import numpy as np
import pytest

from trustroute.router.strategies.change_point import bernoulli_kl, detect_change, glr_threshold


def test_bernoulli_kl_values() -> None:
    kl = bernoulli_kl(np.array([0.5, 0.0, 1.0, 0.3]), np.array([0.5, 0.5, 0.5, 0.3]))
    assert kl.tolist() == pytest.approx([0.0, np.log(2), np.log(2), 0.0])
    assert bernoulli_kl(np.array([0.9]), np.array([0.5]))[0] == pytest.approx(
        0.9 * np.log(0.9 / 0.5) + 0.1 * np.log(0.1 / 0.5))


def test_threshold_is_besson_kaufmann_for_one_parameter() -> None:
    assert float(glr_threshold(100, 1, 0.01)) == pytest.approx(np.log(3 * 100**1.5 / 0.01))
    t = np.log(3 * 100**1.5 / 0.01)
    assert float(glr_threshold(100, 3, 0.01)) == pytest.approx(t + 1.0 + np.sqrt(2 * t))


def test_threshold_grows_with_length_and_task_types() -> None:
    assert glr_threshold(100, 1, 0.01) < glr_threshold(1000, 1, 0.01)
    assert glr_threshold(100, 1, 0.01) < glr_threshold(100, 3, 0.01)
    assert glr_threshold(100, 1, 0.05) < glr_threshold(100, 1, 0.01)


def test_stationary_outcomes_raise_no_alarm() -> None:
    false_alarms = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        groups = rng.integers(0, 3, 150)
        means = np.array([0.2, 0.6, 0.9])[groups]
        values = (rng.random(150) < means).astype(float)
        false_alarms += detect_change(groups, values, delta=0.01) is not None
    assert false_alarms <= 1


def test_a_regression_is_found_near_where_it_happened() -> None:
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 2, 120)
    values = (rng.random(120) < np.where(np.arange(120) < 90, 0.9, 0.2)).astype(float)
    change = detect_change(groups, values)
    assert change is not None
    assert 85 <= change.index <= 95
    assert change.before > 0.8 and change.after < 0.4
    assert change.statistic > change.threshold


def test_a_change_in_task_type_mix_alone_is_not_a_change() -> None:
    # first half mostly the easy type, second half mostly the hard one; means unchanged
    rng = np.random.default_rng(5)
    groups = np.concatenate([(rng.random(100) < 0.1), (rng.random(100) < 0.9)]).astype(int)
    means = np.array([0.9, 0.2])[groups]
    values = (rng.random(200) < means).astype(float)
    assert detect_change(groups, values) is None
    # pooled over types the raw mean shifts a lot, which a single-stream test would flag
    single = detect_change(np.zeros(200, dtype=int), values)
    assert single is not None


def test_evidence_from_several_task_types_adds_up() -> None:
    # a drop of 0.6 on each of three types, 10 runs each after it: summing the three
    # types' statistics detects it far more often than any type's test alone
    n, at = 150, 120
    joint = alone = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        groups = np.tile([0, 1, 2], n // 3)
        means = np.array([0.8, 0.7, 0.9])[groups] - np.where(np.arange(n) < at, 0.0, 0.6)
        values = (rng.random(n) < means).astype(float)
        joint += detect_change(groups, values) is not None
        alone += sum(detect_change(np.zeros(n // 3, dtype=int), values[groups == k])
                     is not None for k in range(3))
    assert joint / 30 >= 0.75
    assert alone / 90 <= 0.3


def test_an_agent_wide_regression_is_caught_by_the_common_shift_test() -> None:
    # five task types, 20 runs each before and 12 each after a drop of 0.4 everywhere:
    # the per-type test pays five degrees of freedom, the common shift only one
    hits = {"shift": 0, "per_type": 0}
    for seed in range(20):
        rng = np.random.default_rng(seed)
        groups = np.tile(np.arange(5), 32)
        means = np.array([0.5, 0.6, 0.45, 0.55, 0.4])[groups]
        means = means - np.where(np.arange(160) >= 100, 0.4, 0.0)
        values = (rng.random(160) < means).astype(float)
        change = detect_change(groups, values, delta=0.05)
        if change is not None:
            hits[change.kind] += 1
            assert 85 <= change.index <= 110
            assert change.after < change.before
    assert hits["shift"] >= 10
    assert hits["per_type"] == 0


def test_a_change_on_one_task_type_only_is_caught() -> None:
    caught = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        groups = np.tile([0, 1, 2], 60)
        drop = np.where((np.arange(180) >= 90) & (groups == 0), 0.8, 0.0)
        means = np.array([0.9, 0.5, 0.3])[groups] - drop
        change = detect_change(groups, (rng.random(180) < means).astype(float))
        caught += change is not None and 80 <= change.index <= 110
    assert caught >= 8


def test_short_sequences_are_not_tested() -> None:
    assert detect_change(np.array([0]), np.array([1.0])) is None
    assert detect_change(np.zeros(0, dtype=int), np.zeros(0)) is None

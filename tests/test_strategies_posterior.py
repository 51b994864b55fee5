"""Posterior math: Beta fractional updates, shrinkage, pooled strength, Wilson bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustroute.router.stats import wilson_lower_bound
from trustroute.router.strategies.posterior import (
    MEAN_FLOOR,
    beta_mean,
    beta_parameters,
    beta_sd,
    clip_mean,
    halving,
    pooled_strength,
    shrunk_mean,
)


def test_fractional_update_adds_quality_and_its_complement() -> None:
    # prior mean 0.5 worth 2 runs = Beta(1, 1); runs of quality 1, 0.5, 0.8
    alpha, beta = beta_parameters(0.5, 2.0, 1.0 + 0.5 + 0.8, 3.0)
    assert alpha == pytest.approx(1.0 + 2.3)
    assert beta == pytest.approx(1.0 + 0.7)
    assert beta_mean(alpha, beta) == pytest.approx(3.3 / 5.0)


def test_beta_sd_matches_the_closed_form() -> None:
    assert beta_sd(1.0, 1.0) == pytest.approx(math.sqrt(1 / 12))
    assert beta_sd(2.0, 3.0) == pytest.approx(math.sqrt(6 / (25 * 6)))
    draws = np.random.default_rng(0).beta(3.0, 7.0, 200_000)
    assert beta_sd(3.0, 7.0) == pytest.approx(draws.std(), rel=0.01)


def test_shrunk_mean_is_the_prior_without_evidence_and_the_data_with_much() -> None:
    assert shrunk_mean(0.0, 0.0, 0.7, 2.0) == pytest.approx(0.7)
    assert shrunk_mean(9.0, 10.0, 0.5, 2.0) == pytest.approx((9.0 + 1.0) / 12.0)
    assert shrunk_mean(900.0, 1000.0, 0.1, 2.0) == pytest.approx(0.9, abs=0.002)


def test_pooled_strength_grows_with_evidence_but_is_capped_by_the_spread() -> None:
    none = pooled_strength(0.0, 2.0, 16.0)
    some = pooled_strength(10.0, 2.0, 16.0)
    lots = pooled_strength(10_000.0, 2.0, 16.0)
    assert none == pytest.approx(2.0 * 16.0 / 18.0)
    assert none < some < lots < 16.0
    assert lots == pytest.approx(16.0, rel=0.01)
    arr = pooled_strength(np.array([0.0, 10.0]), 2.0, 16.0)
    assert arr.tolist() == pytest.approx([none, some])


def test_clip_mean_keeps_beta_parameters_positive() -> None:
    assert clip_mean(-0.3) == MEAN_FLOOR
    assert clip_mean(1.4) == 1.0 - MEAN_FLOOR
    assert clip_mean(np.array([0.2])).tolist() == [0.2]


def test_halving_weights_by_age() -> None:
    assert halving(0.0, 100.0) == 1.0
    assert halving(100.0, 100.0) == pytest.approx(0.5)
    assert halving(300.0, 100.0) == pytest.approx(0.125)
    assert halving(1e9, None) == 1.0
    assert halving(np.array([0.0, 50.0]), 50.0).tolist() == pytest.approx([1.0, 0.5])


def test_wilson_lower_bound_reference_values() -> None:
    # the lucky-streak case: 1 perfect run vs 10 runs at 0.80
    assert wilson_lower_bound(1.0, 1.0) == pytest.approx(0.2065, abs=1e-3)
    assert wilson_lower_bound(0.8, 10.0) == pytest.approx(0.4902, abs=1e-3)
    assert wilson_lower_bound(0.5, 0.0) == pytest.approx(0.0, abs=1e-9)
    # a wider z gives a lower bound
    assert wilson_lower_bound(0.8, 10.0, z=2.58) < wilson_lower_bound(0.8, 10.0)


@given(st.floats(0.0, 1.0), st.floats(0.0, 500.0))
def test_wilson_bound_stays_below_the_mean(p: float, n: float) -> None:
    bound = wilson_lower_bound(p, n)
    assert 0.0 <= bound <= p + 1e-12


@given(st.floats(0.01, 0.99), st.floats(0.1, 50.0), st.floats(0.0, 40.0), st.floats(0.0, 1.0))
def test_posterior_mean_lies_between_prior_and_evidence(prior: float, strength: float,
                                                        runs: float, mean: float) -> None:
    alpha, beta = beta_parameters(prior, strength, mean * runs, runs)
    post = beta_mean(alpha, beta)
    assert min(prior, mean) - 1e-9 <= post <= max(prior, mean) + 1e-9

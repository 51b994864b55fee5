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
    log_gamma,
    pooled_strength,
    robust_beta_parameters,
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


def _mixture_moments(weights: list[float], components: list[tuple[float, float]]
                     ) -> tuple[float, float]:
    """Mean and variance of a Beta mixture, by numerical integration (scipy)."""
    from scipy import integrate, stats

    def density(x: float) -> float:
        return sum(w * stats.beta.pdf(x, a, b) for w, (a, b) in zip(weights, components,
                                                                     strict=True))

    mean = integrate.quad(lambda x: x * density(x), 0.0, 1.0, limit=200)[0]
    second = integrate.quad(lambda x: x * x * density(x), 0.0, 1.0, limit=200)[0]
    return mean, second - mean * mean


@pytest.mark.parametrize(("prior", "strength", "total", "runs"),
                         [(0.9, 16.0, 1.0, 6.0), (0.22, 1.8, 0.0, 3.0), (0.7, 10.0, 4.2, 5.0),
                          (0.5, 4.0, 0.0, 0.0), (0.05, 16.0, 30.0, 40.0)])
@pytest.mark.parametrize(("vague_mean", "vague_strength"), [(0.5, 2.0), (0.8, 1.8)])
def test_the_robust_posterior_has_the_mixture_posteriors_mean_and_variance(
        prior: float, strength: float, total: float, runs: float, vague_mean: float,
        vague_strength: float) -> None:
    from scipy.special import betaln

    w = 0.8
    pooled = (strength * prior, strength * (1.0 - prior))
    vague = (vague_strength * vague_mean, vague_strength * (1.0 - vague_mean))
    # the components' weights update by each one's marginal likelihood of the evidence
    log_like = [betaln(a + total, b + runs - total) - betaln(a, b) for a, b in (pooled, vague)]
    raw = [w * math.exp(log_like[0]), (1.0 - w) * math.exp(log_like[1])]
    weights = [x / sum(raw) for x in raw]
    after = [(a + total, b + runs - total) for a, b in (pooled, vague)]
    mean, var = _mixture_moments(weights, after)

    alpha, beta, pooled_share = robust_beta_parameters(prior, strength, total, runs, w,
                                                       vague_mean, vague_strength)
    assert pooled_share == pytest.approx(weights[0], rel=1e-9)
    assert beta_mean(alpha, beta) == pytest.approx(mean, abs=1e-9)
    assert beta_sd(alpha, beta) ** 2 == pytest.approx(var, rel=1e-6)


def test_the_robust_posterior_lets_conflicting_evidence_speak() -> None:
    # the writer on code in `trustroute demo`: a pooled prior at the leader's 0.9 worth 16
    # runs, against 1 success in 6 runs of its own
    plain = beta_mean(*beta_parameters(0.9, 16.0, 1.0, 6.0))
    alpha, beta, pooled_share = robust_beta_parameters(0.9, 16.0, 1.0, 6.0, 0.8)
    assert plain > 0.65
    assert beta_mean(alpha, beta) < 0.35
    assert pooled_share < 0.05
    # evidence that agrees with the prior leaves it nearly as it was
    alpha, beta, pooled_share = robust_beta_parameters(0.9, 16.0, 5.0, 6.0, 0.8)
    assert pooled_share > 0.8
    assert beta_mean(alpha, beta) == pytest.approx(
        beta_mean(*beta_parameters(0.9, 16.0, 5.0, 6.0)), abs=0.02)


def test_a_robust_weight_of_one_is_the_pooled_prior_alone() -> None:
    prior, strength = np.array([0.3, 0.9]), np.array([4.0, 16.0])
    total, runs = np.array([1.0, 1.0]), np.array([2.0, 6.0])
    alpha, beta, share = robust_beta_parameters(prior, strength, total, runs, 1.0)
    plain = beta_parameters(prior, strength, total, runs)
    assert alpha.tolist() == pytest.approx(plain[0].tolist())
    assert beta.tolist() == pytest.approx(plain[1].tolist())
    assert share.tolist() == [1.0, 1.0]


def test_a_robust_mixture_of_the_pooled_prior_with_itself_changes_nothing() -> None:
    # the population component of an agent nobody has seen is its pooled prior: the
    # mixture leaves a newcomer's posterior as it was
    prior, strength = np.array([0.22, 0.6]), np.array([1.8, 1.8])
    total, runs = np.array([0.0, 2.0]), np.array([1.0, 3.0])
    alpha, beta, share = robust_beta_parameters(prior, strength, total, runs, 0.8,
                                                prior, strength)
    plain = beta_parameters(prior, strength, total, runs)
    assert alpha.tolist() == pytest.approx(plain[0].tolist())
    assert beta.tolist() == pytest.approx(plain[1].tolist())
    assert share.tolist() == pytest.approx([0.8, 0.8])


@given(st.floats(1e-4, 1e5))
def test_log_gamma_is_lgamma(x: float) -> None:
    assert log_gamma(x) == pytest.approx(math.lgamma(x), rel=1e-10, abs=1e-10)
    assert log_gamma(np.array([x, 1.0])).tolist() == pytest.approx([math.lgamma(x), 0.0],
                                                                  rel=1e-10, abs=1e-10)

"""Beta-posterior math for learning strategies: pooling, discounting, bounds.

Pure functions over floats or numpy arrays (no state, no I/O), so every formula the
Thompson and lower-bound strategies use can be tested on its own:

- quality in [0, 1] is treated as a fractional Bernoulli outcome: a run of quality q
  adds q to the Beta's alpha and 1 - q to its beta (Beta "fractional updates");
- ``shrunk_mean``: a mean estimated from evidence and pulled toward a prior mean by a
  number of pseudo-observations (the empirical-Bayes shrinkage behind pooling);
- ``pooled_strength``: how many pseudo-observations a pooled prior is worth, limited
  both by the evidence behind it and by how far a task type may differ from it;
- ``halving``: the weight of evidence of a given age under a half-life (the ledger
  applies it through reference frames);
- ``robust_beta_parameters``: the posterior under a robust mixture prior (the pooled
  prior mixed with a vague Beta, by default the uniform Beta(1, 1)), moment-matched back
  to one Beta.

The Wilson lower bound of exploit-only mode is in ``trustroute.router.stats``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

FloatOrArray = Any  # a float or a numpy array; every function works elementwise

#: Prior means are kept this far from 0 and 1 so a Beta never degenerates.
MEAN_FLOOR = 0.005


def shrunk_mean(total: FloatOrArray, weight: FloatOrArray, prior_mean: FloatOrArray,
                prior_strength: float) -> FloatOrArray:
    """``(total + k * prior_mean) / (weight + k)``: evidence mean pulled toward a prior.

    ``total`` is the (discounted) sum of qualities and ``weight`` the (discounted)
    number of runs behind it; with no evidence the result is ``prior_mean``.
    """
    return (total + prior_strength * prior_mean) / (weight + prior_strength)


def pooled_strength(evidence: FloatOrArray, shrink_strength: float,
                    spread_strength: float) -> FloatOrArray:
    """Pseudo-observations a pooled prior is worth in one task type's posterior.

    The pooled estimate is known from ``evidence + shrink_strength`` observations, and a
    task type may differ from it by a spread worth ``spread_strength`` observations.
    Independent uncertainties add, so the precisions combine harmonically: the result
    grows with evidence but never exceeds ``spread_strength``.
    """
    known = evidence + shrink_strength
    return known * spread_strength / (known + spread_strength)


def clip_mean(mean: FloatOrArray) -> FloatOrArray:
    """Keep a prior mean inside ``[MEAN_FLOOR, 1 - MEAN_FLOOR]``."""
    return np.minimum(np.maximum(mean, MEAN_FLOOR), 1.0 - MEAN_FLOOR)  # np.clip: 2x slower


def beta_parameters(prior_mean: FloatOrArray, prior_strength: FloatOrArray,
                    total: FloatOrArray, weight: FloatOrArray
                    ) -> tuple[FloatOrArray, FloatOrArray]:
    """Posterior ``(alpha, beta)`` from a prior (mean, strength) and fractional evidence.

    ``total`` is the sum of qualities (successes) and ``weight - total`` the sum of
    their complements (failures), both possibly discounted.
    """
    alpha = prior_strength * prior_mean + total
    beta = prior_strength * (1.0 - prior_mean) + (weight - total)
    return alpha, beta


_HALF_LOG_TAU = 0.5 * math.log(2.0 * math.pi)
_SHIFT = 8  # lgamma(x) = lgamma(x + 8) - log(x (x + 1) ... (x + 7)); Stirling from 8 on


def log_gamma(x: FloatOrArray) -> FloatOrArray:
    """``lgamma(x)`` for ``x > 0``, elementwise in numpy (which has no lgamma).

    The argument is shifted to ``x + 8`` by the recurrence, where Stirling's series to
    the ``z^-7`` term is exact to about 1e-12.
    """
    x = np.asarray(x, dtype=float)
    product = np.prod(x[..., None] + np.arange(_SHIFT), axis=-1)
    z = x + _SHIFT
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0
                                                               - inv2 / 1680.0)))
    out = (z - 0.5) * np.log(z) - z + _HALF_LOG_TAU + series - np.log(product)
    return float(out) if out.ndim == 0 else out


def log_beta_function(a: FloatOrArray, b: FloatOrArray) -> FloatOrArray:
    """``log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)``, elementwise."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out = np.asarray(log_gamma(a) + log_gamma(b) - log_gamma(a + b), dtype=float)
    return float(out) if out.ndim == 0 else out


def robust_beta_parameters(prior_mean: FloatOrArray, prior_strength: FloatOrArray,
                           total: FloatOrArray, weight: FloatOrArray, pooled_weight: float,
                           vague_mean: FloatOrArray = 0.5, vague_strength: FloatOrArray = 2.0
                           ) -> tuple[FloatOrArray, FloatOrArray, FloatOrArray]:
    """Posterior ``(alpha, beta, pooled share)`` under a robust mixture prior.

    The prior is ``pooled_weight x Beta(pooled) + (1 - pooled_weight) x Beta(vague)``,
    the vague component of mean ``vague_mean`` worth ``vague_strength`` runs (by default
    the uniform Beta(1, 1))
    (Schmidli et al., "Robust meta-analytic-predictive priors in clinical trials with
    historical control information", Biometrics 2014). Each component is updated by the
    fractional evidence as in ``beta_parameters``, and its weight by its marginal
    likelihood of that evidence, ``B(a + successes, b + failures) / B(a, b)``: where the
    pair's own runs conflict with the pooled prior the uniform component takes over,
    where they agree little changes. The mixture is moment-matched back to one Beta
    (same mean and variance), the form every strategy reads; a one-outcome look-ahead
    (the knowledge gradient) depends on the first two moments only, so it is exact for
    it. The pooled share is the pooled component's posterior weight.
    """
    a1, b1 = beta_parameters(prior_mean, prior_strength, total, weight)
    if pooled_weight >= 1.0:
        return a1, b1, np.ones_like(a1) if isinstance(a1, np.ndarray) else 1.0
    good = np.maximum(total, 0.0)
    bad = np.maximum(np.asarray(weight) - total, 0.0)
    vague_a = vague_strength * vague_mean
    vague_b = vague_strength * (1.0 - vague_mean)
    a0, b0 = vague_a + good, vague_b + bad
    prior_a = prior_strength * prior_mean
    prior_b = prior_strength * (1.0 - prior_mean)
    # both components' log B(after) - log B(before), in one call of log_gamma
    g = np.asarray(log_gamma(np.stack(np.broadcast_arrays(
        a1, b1, a1 + b1, prior_a, prior_b, prior_a + prior_b,
        a0, b0, a0 + b0, vague_a, vague_b, vague_a + vague_b))))
    log_pooled = math.log(pooled_weight) + (g[0] + g[1] - g[2]) - (g[3] + g[4] - g[5])
    log_vague = math.log1p(-pooled_weight) + (g[6] + g[7] - g[8]) - (g[9] + g[10] - g[11])
    share = 1.0 / (1.0 + np.exp(log_vague - log_pooled))
    n1, n0 = a1 + b1, a0 + b0
    m1, m0 = a1 / n1, a0 / n0
    mean = share * m1 + (1.0 - share) * m0
    second = (share * (m1 * m1 + m1 * (1.0 - m1) / (n1 + 1.0))
              + (1.0 - share) * (m0 * m0 + m0 * (1.0 - m0) / (n0 + 1.0)))
    variance = np.maximum(second - mean * mean, 1e-300)
    strength = mean * (1.0 - mean) / variance - 1.0
    return mean * strength, (1.0 - mean) * strength, share


def beta_mean(alpha: FloatOrArray, beta: FloatOrArray) -> FloatOrArray:
    """Mean of Beta(alpha, beta)."""
    return alpha / (alpha + beta)


def beta_sd(alpha: FloatOrArray, beta: FloatOrArray) -> FloatOrArray:
    """Standard deviation of Beta(alpha, beta)."""
    n = alpha + beta
    return np.sqrt(alpha * beta / (n * n * (n + 1.0)))


def halving(age: FloatOrArray, half_life: float | None) -> FloatOrArray:
    """Weight ``2 ** (-age / half_life)`` of evidence of ``age``; 1 when no half-life."""
    if half_life is None:
        return np.ones_like(age, dtype=float) if isinstance(age, np.ndarray) else 1.0
    return np.exp2(-np.asarray(age, dtype=float) / half_life) if isinstance(
        age, np.ndarray) else 2.0 ** (-float(age) / half_life)


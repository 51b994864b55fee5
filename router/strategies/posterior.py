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
  applies it through reference frames).

The Wilson lower bound of exploit-only mode is in ``trustroute.router.stats``.
"""

from __future__ import annotations

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


"""The statistics the router shares: pure functions over numbers and arrays, no I/O.

- ``wilson_lower_bound``: the lower end of the Wilson score interval of a proportion,
  for one proportion (trust's effectiveness score) or arrays of them (the strategies'
  exploit-only bound); fractional trial counts (discounted evidence) are allowed;
- ``binomial_cdf``: every ``P(Binomial(n, p) <= k)``, the tail behind the hand-off
  recall guarantee;
- ``auroc``: area under the ROC curve (Mann-Whitney, mid-ranks for ties);
- ``expected_calibration_error`` and ``brier_score``: how honest stated probabilities
  were, over (predicted, outcome) pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: z of a two-sided 95% interval.
Z95 = 1.96

Floats = NDArray[np.float64]


@overload
def wilson_lower_bound(proportion: float, n: float, z: float = Z95) -> float: ...


@overload
def wilson_lower_bound(proportion: Floats, n: Floats | float, z: float = Z95) -> Floats: ...


@overload
def wilson_lower_bound(proportion: float, n: Floats, z: float = Z95) -> Floats: ...


def wilson_lower_bound(proportion: Floats | float, n: Floats | float,
                       z: float = Z95) -> Floats | float:
    """Wilson score lower bound of a proportion observed over ``n`` trials, in [0, 1].

    Works elementwise on arrays (then returns an array) and on plain numbers (then
    returns a float). ``n`` may be fractional; ``n <= 0`` gives 0. One perfect run
    gives 0.21 at z = 1.96 and ten runs at 0.80 give 0.49: the bound ranks an
    established agent above a lucky newcomer.

    Computed as ``2 n p^2 / (2 n p + z^2 + z sqrt(z^2 + 4 n p (1 - p)))``, the textbook
    ``(centre - margin) / (1 + z^2 / n)`` with the difference rationalised away, so
    nothing cancels when ``n p`` is small and ``n = 0`` needs no special case.
    """
    z2 = z * z
    if isinstance(proportion, np.ndarray) or isinstance(n, np.ndarray):
        p = np.asarray(proportion, dtype=float)
        m = np.maximum(np.asarray(n, dtype=float), 0.0)
        mp = m * p
        denom = 2.0 * mp + z2 + z * np.sqrt(z2 + 4.0 * m * np.maximum(p * (1.0 - p), 0.0))
        num = 2.0 * mp * p
        bound = np.divide(num, denom, out=np.zeros(np.broadcast(num, denom).shape),
                          where=denom > 0.0)
        return np.clip(np.minimum(bound, p), 0.0, 1.0)  # <= p, also where rounding isn't
    p_, m_ = float(proportion), max(float(n), 0.0)
    mp_ = m_ * p_
    denom_ = 2.0 * mp_ + z2 + z * math.sqrt(z2 + 4.0 * m_ * max(p_ * (1.0 - p_), 0.0))
    return min(1.0, p_, max(0.0, 2.0 * mp_ * p_ / denom_)) if denom_ > 0.0 else 0.0


def binomial_cdf(n: int, p: float) -> Floats:
    """``P(Binomial(n, p) <= k)`` for every ``k`` in ``0..n`` (an array of ``n + 1``).

    Summed from log-probabilities scaled by their largest, so neither a large ``n`` nor
    a ``p`` near 0 or 1 underflows the part of the distribution that matters.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= p <= 1.0:  # also rejects NaN
        raise ValueError(f"p must be a probability in [0, 1], got {p}")
    if p == 0.0:
        return np.ones(n + 1)
    if p == 1.0:
        cdf = np.zeros(n + 1)
        cdf[-1] = 1.0
        return cdf
    ks = np.arange(1, n + 1, dtype=float)
    # log C(n, k) = sum over i <= k of log((n - i + 1) / i)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(n - ks + 1.0) - np.log(ks))))
    k_all = np.arange(n + 1, dtype=float)
    log_pmf = log_choose + k_all * math.log(p) + (n - k_all) * math.log1p(-p)
    cdf = np.cumsum(np.exp(log_pmf - log_pmf.max()))
    return cdf / cdf[-1]


def auroc(scores: ArrayLike, positive: ArrayLike) -> float | None:
    """Area under the ROC curve of ``scores`` ranking ``positive`` cases above the rest.

    Mann-Whitney form with mid-ranks for tied scores (a tie counts one half); None when
    either class is empty.
    """
    s = np.asarray(scores, dtype=float).ravel()
    pos = np.asarray(positive, dtype=bool).ravel()
    if s.shape != pos.shape:
        raise ValueError(f"scores ({s.size}) and positive ({pos.size}) differ in length")
    n_pos = int(pos.sum())
    n_neg = int(pos.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # rank of the last of each group of equal scores
    mid_ranks = ends - (counts - 1) / 2.0
    rank_sum = float(mid_ranks[inverse][pos].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def _pairs(predicted: Sequence[float] | Floats,
           outcomes: Sequence[bool] | NDArray[np.bool_]) -> tuple[Floats, Floats]:
    if len(predicted) != len(outcomes):
        raise ValueError(f"predicted ({len(predicted)}) and outcomes ({len(outcomes)}) "
                         f"differ in length")
    p = np.asarray(predicted, dtype=float).ravel()
    bad = ~((p >= 0.0) & (p <= 1.0))  # also catches NaN
    if bad.any():
        raise ValueError(f"predicted must be a probability in [0, 1], got {p[bad][0]}")
    return p, np.asarray(outcomes, dtype=bool).ravel().astype(float)


def expected_calibration_error(predicted: Sequence[float] | Floats,
                               outcomes: Sequence[bool] | NDArray[np.bool_],
                               buckets: int = 10) -> float:
    """Count-weighted mean ``|realised rate - mean predicted|`` over equal-width buckets.

    Bucket ``i`` holds ``[i / buckets, (i + 1) / buckets)``, and 1.0 falls in the last
    one; 0 with no pairs.
    """
    if buckets < 1:
        raise ValueError("buckets must be >= 1")
    p, o = _pairs(predicted, outcomes)
    if not p.size:
        return 0.0
    which = np.minimum(buckets - 1, (p * buckets).astype(int))
    counts = np.bincount(which, minlength=buckets)
    gaps = np.bincount(which, weights=o, minlength=buckets) - np.bincount(
        which, weights=p, minlength=buckets)  # count * (realised - predicted) per bucket
    return float(np.abs(gaps).sum() / counts.sum())


def brier_score(predicted: Sequence[float] | Floats,
                outcomes: Sequence[bool] | NDArray[np.bool_]) -> float:
    """Mean squared error of the probabilities (0 is perfect; 0.25 is a coin at 0.5)."""
    p, o = _pairs(predicted, outcomes)
    if not p.size:
        return 0.0
    return float(np.mean((p - o) ** 2))

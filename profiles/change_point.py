"""Change-point test: has an agent's quality shifted within its recent outcomes?

A generalized likelihood ratio (GLR) test for Bernoulli means (Besson & Kaufmann,
"Efficient change-point detection for tackling piecewise-stationary bandits", JMLR
2022), extended to an agent that works on several task types: each task type keeps
its own mean before and after the change, and the agent-level statistic at a split is
the *sum* of the per-type GLR statistics (the likelihoods are independent), so a
regression that shows on every task type is caught from all of them at once, while a
mere change in the mix of task types (each type's mean unchanged) raises nothing.

Threshold: twice the statistic is about chi-square with one degree of freedom per task
type observed on both sides of the split; the Laurent-Massart tail bound
``P(chi2_d >= d + 2 sqrt(d t) + 2 t) <= exp(-t)`` with ``t = ln(3 n^1.5 / delta)``
(a union bound over the splits of n outcomes, as in Besson & Kaufmann) gives the
threshold ``d/2 + sqrt(d t) + t`` for the statistic. Qualities in [0, 1] are allowed:
the Bernoulli KL bounds any [0, 1]-valued variable's likelihood ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EPS = 1e-9


def bernoulli_kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL divergence between Bernoulli(p) and Bernoulli(q), elementwise (0 log 0 = 0)."""
    p = np.clip(p, 0.0, 1.0)
    q = np.clip(q, _EPS, 1.0 - _EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p > 0.0, p * np.log(np.maximum(p, _EPS) / q), 0.0)
        b = np.where(p < 1.0, (1.0 - p) * np.log(np.maximum(1.0 - p, _EPS) / (1.0 - q)), 0.0)
    return np.asarray(a + b)


def glr_threshold(n: int, dof: np.ndarray | int, delta: float) -> np.ndarray:
    """Detection threshold for ``n`` outcomes and ``dof`` task types split by the change."""
    t = float(np.log(3.0 * n ** 1.5 / delta))
    d = np.asarray(dof, dtype=float)
    return np.asarray(d / 2.0 + np.sqrt(d * t) + t)


@dataclass(frozen=True, slots=True)
class ChangePoint:
    """A detected change: outcomes from ``index`` on differ from the ones before."""

    index: int  # first outcome after the change (position in the tested sequence)
    statistic: float
    threshold: float
    before: float  # mean quality before / after the split, all task types pooled
    after: float


def _xlogx(x: np.ndarray) -> np.ndarray:
    """``x ln x`` with ``0 ln 0 = 0``."""
    return np.asarray(x * np.log(np.maximum(x, 1e-300)))


def _split_entropy(total: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``n * KL``-ready term: ``s ln s + (n - s) ln(n - s) - n ln n`` (0 for n = 0)."""
    return _xlogx(total) + _xlogx(np.maximum(count - total, 0.0)) - _xlogx(count)


def glr_statistics(groups: np.ndarray, values: np.ndarray, splits: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """GLR statistic and degrees of freedom at each split in ``splits`` (1 .. n-1).

    The statistic at split s is the sum over task types of
    ``n_before KL(mean_before, mean) + n_after KL(mean_after, mean)``, computed in the
    equivalent entropy form ``h(before) + h(after) - h(all)`` with
    ``h(s, n) = s ln s + (n - s) ln(n - s) - n ln n`` (fewer array passes).
    """
    n = len(values)
    onehot = np.zeros((int(groups.max()) + 1, n))
    onehot[groups, np.arange(n)] = 1.0
    count_cum = np.cumsum(onehot, axis=1)
    sum_cum = np.cumsum(onehot * values, axis=1)
    count_all, sum_all = count_cum[:, -1:], sum_cum[:, -1:]
    count_before, sum_before = count_cum[:, splits - 1], sum_cum[:, splits - 1]
    count_after, sum_after = count_all - count_before, sum_all - sum_before
    # h(before) + h(after) - h(all), all task types at once: few, large array passes
    positive = _xlogx(np.stack((sum_before, count_before - sum_before,
                                sum_after, count_after - sum_after)))
    negative = _xlogx(np.stack((count_before, count_after)))
    whole = _split_entropy(sum_all, count_all)
    stat = positive.sum(axis=(0, 1)) - negative.sum(axis=(0, 1)) - float(whole.sum())
    dof = ((count_before > 0) & (count_after > 0)).sum(axis=0)
    return np.maximum(stat, 0.0), dof


def detect_change(groups: np.ndarray, values: np.ndarray, delta: float = 0.01,
                  min_segment: int = 1, max_splits: int = 64) -> ChangePoint | None:
    """The strongest change in ``values`` (ordered by time) if the GLR test fires.

    ``groups[i]`` is the task type of outcome ``i``, numbered 0, 1, 2, ... (compact:
    the statistic allocates one row per number up to the largest). Splits leave at
    least ``min_segment`` outcomes on each side; at most about ``max_splits`` evenly
    spaced splits are tried.
    """
    n = len(values)
    if n < 2 * min_segment or n < 2:
        return None
    values = np.asarray(values, dtype=float)
    # candidate splits on a grid of at most ~max_splits points (Besson & Kaufmann's
    # down-sampling): the change point is located to within the grid step
    step = max(1, (n - 1) // max_splits)
    splits = np.arange(max(1, min_segment), n - min_segment + 1, step)
    if len(splits) == 0:
        return None
    stat, dof = glr_statistics(np.asarray(groups, dtype=np.int64), values, splits)
    threshold = glr_threshold(n, np.maximum(dof, 1), delta)
    margin = np.where(dof > 0, stat - threshold, -np.inf)
    best = int(np.argmax(margin))
    if not margin[best] > 0.0:
        return None
    s = int(splits[best])
    return ChangePoint(index=s, statistic=float(stat[best]), threshold=float(threshold[best]),
                       before=float(values[:s].mean()), after=float(values[s:].mean()))

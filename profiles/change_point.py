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


def detect_change(groups: np.ndarray, values: np.ndarray, delta: float = 0.01,
                  min_segment: int = 1) -> ChangePoint | None:
    """The strongest change in ``values`` (ordered by time) if the GLR test fires.

    ``groups[i]`` is the task type (a small integer) of outcome ``i``. Splits leave at
    least ``min_segment`` outcomes on each side.
    """
    n = len(values)
    if n < 2 * min_segment or n < 2:
        return None
    groups = np.asarray(groups, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    _, local = np.unique(groups, return_inverse=True)
    onehot = np.zeros((int(local.max()) + 1, n))
    onehot[local, np.arange(n)] = 1.0
    count_before = np.cumsum(onehot, axis=1)[:, :-1]  # split s: outcomes [0, s) vs [s, n)
    sum_before = np.cumsum(onehot * values, axis=1)[:, :-1]
    count_all = onehot.sum(axis=1, keepdims=True)
    sum_all = (onehot * values).sum(axis=1, keepdims=True)
    count_after = count_all - count_before
    sum_after = sum_all - sum_before
    mean_all = sum_all / np.maximum(count_all, 1.0)
    mean_before = sum_before / np.maximum(count_before, 1.0)
    mean_after = sum_after / np.maximum(count_after, 1.0)
    stat = (count_before * bernoulli_kl(mean_before, mean_all)
            + count_after * bernoulli_kl(mean_after, mean_all)).sum(axis=0)
    dof = ((count_before > 0) & (count_after > 0)).sum(axis=0)
    threshold = glr_threshold(n, np.maximum(dof, 1), delta)
    splits = np.arange(1, n)
    valid = (splits >= min_segment) & (n - splits >= min_segment) & (dof > 0)
    margin = np.where(valid, stat - threshold, -np.inf)
    best = int(np.argmax(margin))
    if not margin[best] > 0.0:
        return None
    s = best + 1
    return ChangePoint(index=s, statistic=float(stat[best]), threshold=float(threshold[best]),
                       before=float(values[:s].mean()), after=float(values[s:].mean()))

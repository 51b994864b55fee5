"""Change-point test: has an agent's quality shifted within its recent outcomes?

Generalized likelihood ratio (GLR) tests for Bernoulli means (Besson & Kaufmann,
"Efficient change-point detection for tackling piecewise-stationary bandits", JMLR
2022), extended to an agent that works on several task types. Two tests share the
false-alarm budget, and a mere change in the mix of task types (each type's mean
unchanged) raises neither:

- per type: each task type keeps its own mean before and after the change; the
  statistic is the *sum* of the per-type GLR statistics (independent likelihoods), so
  a change confined to one task type is caught;
- common shift: the outcomes after the split are compared with what each one's task
  type did before it, pooled into one degree of freedom, so an agent-wide regression
  (a model update gone wrong) is caught from every task type at once, several times
  sooner than by the per-type test.

Threshold: ``t = ln(3 n^1.5 / delta)`` (Besson & Kaufmann; a union bound over the
splits of n outcomes) for one parameter. Twice the per-type statistic is about
chi-square with one degree of freedom per task type observed on both sides of the
split, so each type beyond the first adds the Laurent-Massart excess
(``P(chi2_d >= d + 2 sqrt(d t) + 2 t) <= exp(-t)``): ``t + (d-1)/2 + sqrt((d-1) t)``.
Qualities in [0, 1] are allowed: the Bernoulli KL bounds any [0, 1]-valued variable's
likelihood ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EPS = 1e-9
_MIN_BASELINE_RUNS = 5  # outcomes needed before a split for the shift test to use it


def bernoulli_kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL divergence between Bernoulli(p) and Bernoulli(q), elementwise (0 log 0 = 0)."""
    p = np.clip(p, 0.0, 1.0)
    q = np.clip(q, _EPS, 1.0 - _EPS)
    return np.asarray(_xlogx(p) + _xlogx(1.0 - p) - p * np.log(q) - (1.0 - p) * np.log1p(-q))


def glr_threshold(n: int, dof: np.ndarray | int, delta: float) -> np.ndarray:
    """Detection threshold for ``n`` outcomes and ``dof`` task types split by the change.

    ``t = ln(3 n^1.5 / delta)`` is Besson & Kaufmann's threshold for one parameter; each
    further degree of freedom adds its chi-square excess (Laurent-Massart):
    ``t + (d - 1)/2 + sqrt((d - 1) t)``.
    """
    t = float(np.log(3.0 * n ** 1.5 / delta))
    extra = np.maximum(np.asarray(dof, dtype=float) - 1.0, 0.0)
    return np.asarray(t + extra / 2.0 + np.sqrt(extra * t))


@dataclass(frozen=True, slots=True)
class ChangePoint:
    """A detected change: outcomes from ``index`` on differ from the ones before."""

    index: int  # first outcome after the change (position in the tested sequence)
    statistic: float
    threshold: float
    before: float  # mean quality before / after the split, all task types pooled
    after: float
    kind: str = "per_type"  # which test fired: "per_type" or "shift" (agent-wide)


def _xlogx(x: np.ndarray) -> np.ndarray:
    """``x ln x`` with ``0 ln 0 = 0``."""
    return np.asarray(x * np.log(np.maximum(x, 1e-300)))


def split_statistics(groups: np.ndarray, values: np.ndarray, splits: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both statistics at each split in ``splits`` (1 .. n-1): ``(per_type, dof, shift)``,
    ``dof`` being the task types observed on both sides of the split.

    per-type GLR: the sum over task types of
    ``n_before KL(mean_before, mean) + n_after KL(mean_after, mean)``, computed in the
    equivalent entropy form ``h(before) + h(after) - h(all)`` with
    ``h(s, n) = s ln s + (n - s) ln(n - s) - n ln n`` (fewer array passes).

    common shift: ``n_eff KL(observed mean after, expected mean after)``, where each
    outcome after the split is expected at its task type's mean before it. A mix of
    Bernoulli means is dominated by one Bernoulli at their average (Hoeffding), so the
    one-parameter bound applies; ``n_eff`` discounts the after-count for the noise in
    the before-means. It catches an agent-wide regression several times sooner than
    the per-type test, which pays a degree of freedom per task type.
    """
    n = len(values)
    onehot = np.zeros((int(groups.max()) + 1, n))
    onehot[groups, np.arange(n)] = 1.0
    count_cum = np.cumsum(onehot, axis=1)
    sum_cum = np.cumsum(onehot * values, axis=1)
    count_all, sum_all = count_cum[:, -1:], sum_cum[:, -1:]
    # one extra column at split n ("everything before") yields h(all) in the same pass
    columns = np.append(splits, n) - 1
    count_before, sum_before = count_cum[:, columns], sum_cum[:, columns]
    count_after, sum_after = count_all - count_before, sum_all - sum_before
    # h(before) + h(after) - h(all), all task types at once: few, large array passes
    entropy = (_xlogx(np.stack((sum_before, count_before - sum_before,
                                sum_after, count_after - sum_after))).sum(axis=(0, 1))
               - _xlogx(np.stack((count_before, count_after))).sum(axis=(0, 1)))
    per_type = entropy[:-1] - entropy[-1]
    count_before, sum_before = count_before[:, :-1], sum_before[:, :-1]
    count_after, sum_after = count_after[:, :-1], sum_after[:, :-1]
    dof = ((count_before > 0) & (count_after > 0)).sum(axis=0)
    # common shift: after-outcomes against the before-means of their task types
    baseline = (sum_before + 0.5) / (count_before + 1.0)  # Krichevsky-Trofimov estimate
    after = n - splits
    expected = (count_after * baseline).sum(axis=0) / after
    observed = sum_after.sum(axis=0) / after
    # the before-means are estimates too: the effective size 1 / (1/n_after + var of the
    # expectation in run units) reduces, for one task type, to the two-sample GLR's
    # n_before n_after / (n_before + n_after)
    weight = count_after / after
    spread = (weight * weight / (count_before + 1.0)).sum(axis=0)
    effective = 1.0 / (1.0 / after + spread)
    shift = np.where(splits >= _MIN_BASELINE_RUNS,
                     effective * bernoulli_kl(observed, expected), 0.0)
    return np.maximum(per_type, 0.0), dof, shift


def detect_change(groups: np.ndarray, values: np.ndarray, delta: float = 0.05,
                  max_splits: int = 64) -> ChangePoint | None:
    """The strongest change in ``values`` (ordered by time) if either test fires.

    ``groups[i]`` is the task type of outcome ``i``, numbered 0, 1, 2, ... (compact:
    the statistic allocates one row per number up to the largest). At most about
    ``max_splits`` evenly spaced splits are tried. The false-alarm level ``delta`` is
    shared by the two tests.
    """
    n = len(values)
    if n < 2:
        return None
    values = np.asarray(values, dtype=float)
    # candidate splits on a grid of at most ~max_splits points (Besson & Kaufmann's
    # down-sampling): the change point is located to within the grid step
    splits = np.arange(1, n, max(1, (n - 1) // max_splits))
    per_type, dof, shift = split_statistics(np.asarray(groups, dtype=np.int64), values, splits)
    per_type_threshold = glr_threshold(n, np.maximum(dof, 1), delta / 2.0)
    shift_threshold = float(glr_threshold(n, 1, delta / 2.0))
    margins = np.stack((np.where(dof > 0, per_type - per_type_threshold, -np.inf),
                        shift - shift_threshold))
    kind, best = np.unravel_index(int(np.argmax(margins)), margins.shape)
    if not margins[kind, best] > 0.0:
        return None
    s = int(splits[best])
    statistic = per_type[best] if kind == 0 else shift[best]
    threshold = per_type_threshold[best] if kind == 0 else shift_threshold
    return ChangePoint(index=s, statistic=float(statistic), threshold=float(threshold),
                       before=float(values[:s].mean()), after=float(values[s:].mean()),
                       kind="per_type" if kind == 0 else "shift")

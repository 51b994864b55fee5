"""Many change-point tests at once: the windows a monitor tests while a batch arrives.

During a bulk import the change monitor tests each agent's recent history every few
outcomes. One ``detect_change`` costs ~80 us, nearly all numpy call overhead on arrays
of a few hundred numbers, which made the tests the largest cost of importing. Every
window tested while a batch arrives is a slice of one sequence (the agent's history
followed by its new outcomes), so here the prefix sums are taken once and the
statistics of all the windows are computed in the same few array passes.

The result is each window's best margin (statistic minus threshold, over both tests and
every split): ``detect_change`` on that window fires exactly when it is positive. The
caller re-runs ``detect_change`` on a window whose margin is near or above zero, so
rounding in the prefix sums can never change what is detected.

The (task type x window x split) arrays live in a reusable ``ScanWorkspace``: freeing
and re-allocating arrays of a few hundred kB per call made the allocator hand memory
back to the system and fault it in again, which cost more than the arithmetic.
"""

from __future__ import annotations

import numpy as np
from trustroute.router.strategies.change_point import _MIN_BASELINE_RUNS, bernoulli_kl

_TINY = 1e-300  # x ln x at x = 0 is 0: ln(max(x, tiny)) is finite there


class ScanWorkspace:
    """Scratch arrays reused from one ``window_margins`` call to the next (not shared
    between threads)."""

    def __init__(self) -> None:
        self._floats = np.empty(0)
        self._ints = np.empty(0, dtype=np.int64)
        self._xlogx = np.zeros(1)

    def floats(self, count: int, shape: tuple[int, ...]) -> np.ndarray:
        """``count`` float arrays of ``shape`` (stacked), contents undefined."""
        size = count * int(np.prod(shape))
        if self._floats.size < size:
            self._floats = np.empty(2 * size)
        return self._floats[:size].reshape((count, *shape))

    def ints(self, count: int, shape: tuple[int, ...]) -> np.ndarray:
        """``count`` int64 arrays of ``shape`` (stacked), contents undefined."""
        size = count * int(np.prod(shape))
        if self._ints.size < size:
            self._ints = np.empty(2 * size, dtype=np.int64)
        return self._ints[:size].reshape((count, *shape))

    def xlogx(self, most: int) -> np.ndarray:
        """``k ln k`` for the integers k = 0 .. at least ``most`` (counts need no log)."""
        if len(self._xlogx) <= most:
            k = np.arange(2 * most + 2, dtype=float)
            self._xlogx = k * np.log(np.maximum(k, 1.0))
        return self._xlogx


def window_margins(groups: np.ndarray, values: np.ndarray, ends: np.ndarray,
                   sizes: np.ndarray, delta: float, max_splits: int = 64,
                   workspace: ScanWorkspace | None = None) -> np.ndarray:
    """Best margin of ``detect_change`` on each window ``values[end - size:end]``.

    ``groups`` numbers the task types 0, 1, 2, ... over the whole sequence; windows
    need at least 2 outcomes. Uses the same split grid, statistics and thresholds as
    ``detect_change(groups[w], values[w], delta, max_splits=max_splits)``; -inf where no
    split is eligible.
    """
    ws = workspace or ScanWorkspace()
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=np.int64)
    ends, sizes = np.asarray(ends, dtype=np.int64), np.asarray(sizes, dtype=np.int64)
    ntypes, length = int(groups.max()) + 1, len(values)
    # prefix counts and sums per task type: column p covers values[:p]
    columns = np.arange(1, length + 1)
    spread_values = np.zeros((ntypes, length + 1))
    spread_values[groups, columns] = values
    sums = np.cumsum(spread_values, axis=1)
    ones = np.zeros((ntypes, length + 1), dtype=np.int64)
    ones[groups, columns] = 1
    counts = np.cumsum(ones, axis=1)
    # detect_change's split grid of every window: (windows, width), padded
    starts = ends - sizes
    steps = np.maximum(1, (sizes - 1) // max_splits)
    width = int(((sizes - 2) // steps).max()) + 1
    splits = 1 + np.arange(width)[None, :] * steps[:, None]
    valid = splits < sizes[:, None]
    splits = np.where(valid, splits, 1)
    cut = starts[:, None] + splits
    shape = (ntypes, len(sizes), width)  # (task type, window, split)
    work = ws.floats(14, shape)
    count_before, count_after, sum_before, sum_after = work[:4]
    terms, logs = work[4:10], work[10:14]
    int_before, int_after = ws.ints(2, shape)
    first_count = counts[:, starts][:, :, None]
    count_all = counts[:, ends] - first_count[:, :, 0]
    np.take(counts, cut, axis=1, out=int_before)
    int_before -= first_count
    np.subtract(count_all[:, :, None], int_before, out=int_after)
    count_before[...], count_after[...] = int_before, int_after
    first_sum = sums[:, starts][:, :, None]
    sum_all = sums[:, ends] - first_sum[:, :, 0]
    np.take(sums, cut, axis=1, out=sum_before)
    sum_before -= first_sum
    np.subtract(sum_all[:, :, None], sum_before, out=sum_after)
    # per-type GLR in entropy form: h(before) + h(after) - h(all), summed over types,
    # h(s, n) = s ln s + (n - s) ln(n - s) - n ln n (the n ln n from a table)
    xlogx = ws.xlogx(int(sizes.max()))
    terms[0], terms[2] = sum_before, sum_after
    np.subtract(count_before, sum_before, out=terms[1])
    np.subtract(count_after, sum_after, out=terms[3])
    np.maximum(terms[:4], _TINY, out=logs)
    np.log(logs, out=logs)
    np.multiply(terms[:4], logs, out=terms[:4])
    np.negative(np.take(xlogx, int_before, out=terms[4]), out=terms[4])
    np.negative(np.take(xlogx, int_after, out=terms[5]), out=terms[5])
    entropy = terms.sum(axis=(0, 1))
    rest = count_all - sum_all
    whole = (sum_all * np.log(np.maximum(sum_all, _TINY)) + rest * np.log(np.maximum(rest, _TINY))
             - xlogx[count_all]).sum(axis=0)
    per_type = np.maximum(entropy - whole[:, None], 0.0)
    dof = np.count_nonzero(np.minimum(int_before, int_after, out=int_before), axis=0)
    # common shift: after-outcomes against the before-means of their task types
    after = sizes[:, None] - splits
    runs = np.add(count_before, 1.0, out=terms[0])
    expected_sum = np.add(sum_before, 0.5, out=terms[1])  # Krichevsky-Trofimov estimate
    expected_sum /= runs
    expected_sum *= count_after
    expected = expected_sum.sum(axis=0) / after
    observed = sum_after.sum(axis=0) / after
    weight = np.divide(count_after, after, out=terms[2])
    weight *= weight
    weight /= runs
    effective = 1.0 / (1.0 / after + weight.sum(axis=0))
    shift = np.where(splits >= _MIN_BASELINE_RUNS,
                     effective * bernoulli_kl(observed, expected), 0.0)
    # thresholds as glr_threshold: the two tests share delta
    t = np.log(3.0 * sizes.astype(float) ** 1.5 / (delta / 2.0))[:, None]
    extra = np.maximum(dof - 1, 0).astype(float)
    per_type_margin = np.where(dof > 0, per_type - (t + extra / 2.0 + np.sqrt(extra * t)),
                               -np.inf)
    margins = np.where(valid, np.maximum(per_type_margin, shift - t), -np.inf)
    return np.asarray(margins.max(axis=1))

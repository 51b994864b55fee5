"""window_margins: many change-point tests at once agree with detect_change on each window."""

from __future__ import annotations

import numpy as np
import pytest
from trustroute.router.strategies.change_point import detect_change, glr_threshold, split_statistics
from trustroute.router.strategies.change_scan import ScanWorkspace, window_margins


def exact_margin(groups: np.ndarray, values: np.ndarray, delta: float) -> float:
    """detect_change's best margin on one window, from its own building blocks."""
    _, local = np.unique(groups, return_inverse=True)
    n = len(values)
    splits = np.arange(1, n, max(1, (n - 1) // 64))
    stats = split_statistics(local, values, splits)
    per_type = stats.per_type - glr_threshold(n, np.maximum(stats.dof, 1), delta / 2)
    shift = stats.shift - float(glr_threshold(n, 1, delta / 2))
    return float(max(np.max(np.where(stats.dof > 0, per_type, -np.inf)), np.max(shift)))


@pytest.mark.parametrize("binary", [False, True])
def test_margins_match_detect_change_on_every_window(binary: bool) -> None:
    rng = np.random.default_rng(11)
    workspace = ScanWorkspace()
    fired = 0
    for trial in range(60):
        length, types = int(rng.integers(10, 400)), int(rng.integers(1, 6))
        groups = rng.integers(0, types, length)
        means = np.where(np.arange(length) > length // 2, rng.random(), rng.random())
        values = (rng.random(length) < means).astype(float) if binary else np.clip(
            rng.normal(means, 0.2), 0.0, 1.0)
        ends = rng.integers(4, length + 1, 12)
        sizes = np.array([int(rng.integers(4, min(end, 250) + 1)) for end in ends])
        margins = window_margins(groups, values, ends, sizes, 0.05, 64,
                                 workspace if trial % 2 else None)
        for end, size, margin in zip(ends, sizes, margins, strict=True):
            window = slice(end - size, end)
            _, local = np.unique(groups[window], return_inverse=True)
            change = detect_change(local, values[window], 0.05, max_splits=64)
            assert (change is not None) == (margin > 0)
            assert margin == pytest.approx(exact_margin(groups[window], values[window], 0.05),
                                           abs=1e-9)
            fired += change is not None
    assert fired > 20  # the comparison covers windows that fire, not only quiet ones

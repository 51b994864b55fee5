"""Recency weighting: recent outcomes say more about an agent than old ones.

Weight of a record aged ``d`` days is ``exp(-d / time_constant_days)``, multiplied by
``boost`` while ``d < boost_window_days`` (the reference design: 7 days, x3, 7 days).
Pure functions over arrays, so the math is testable without a clock or a database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class RecencySettings:
    """How fast evidence ages when computing expertise."""

    time_constant_days: float = 7.0
    boost: float = 3.0
    boost_window_days: float = 7.0
    window_size: int = 100

    def __post_init__(self) -> None:
        if not self.time_constant_days > 0:
            raise ValueError("recency.time_constant_days must be > 0")
        if not self.boost > 0:
            raise ValueError("recency.boost must be > 0")
        if self.boost_window_days < 0:
            raise ValueError("recency.boost_window_days must be >= 0")
        if self.window_size < 1:
            raise ValueError("recency.window_size must be >= 1")


def recency_weights(ages_days: np.ndarray, settings: RecencySettings) -> np.ndarray:
    """Weights for records of the given ages (negative ages count as age 0)."""
    ages = np.maximum(np.asarray(ages_days, dtype=float), 0.0)
    weights = np.exp(-ages / settings.time_constant_days)
    return np.where(ages < settings.boost_window_days, weights * settings.boost, weights)


def weighted_expertise(qualities: Sequence[float], timestamps: Sequence[float], now: float,
                       settings: RecencySettings) -> float:
    """Recency-weighted mean quality; 0.0 when there is no evidence.

    ``timestamps`` and ``now`` are POSIX seconds.
    """
    if len(qualities) == 0:
        return 0.0
    ages = (now - np.asarray(timestamps, dtype=float)) / SECONDS_PER_DAY
    weights = recency_weights(ages, settings)
    total = float(weights.sum())
    if total <= 0.0:  # every record astronomically old: fall back to the plain mean
        return float(np.mean(qualities))
    mean = float(np.dot(weights, np.asarray(qualities, dtype=float)) / total)
    return min(1.0, max(0.0, mean))  # a mean of values in [0, 1], minus rounding error

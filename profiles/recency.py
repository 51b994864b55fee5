"""Recency weighting: recent outcomes say more about an agent than old ones.

Weight of a record aged ``d`` days is ``exp(-d / time_constant_days)``, multiplied by
``boost`` while ``d < boost_window_days`` (the reference design: 7 days, x3, 7 days).
Pure functions over arrays, so the math is testable without a clock or a database.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

SECONDS_PER_DAY = 86_400.0


class RecencySettings(BaseModel):
    """How fast evidence ages when computing expertise (config key ``profiles.recency``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_constant_days: float = Field(default=7.0, gt=0, allow_inf_nan=False)
    boost: float = Field(default=3.0, gt=0, allow_inf_nan=False)
    boost_window_days: float = Field(default=7.0, ge=0, allow_inf_nan=False)
    window_size: int = Field(default=100, ge=1)


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

"""Recency weighting: recent outcomes say more about an agent than old ones.

Weight of a record aged ``d`` days is ``exp(-d / time_constant_days)``, multiplied by
``boost`` while ``d < boost_window_days`` (the reference design: 7 days, x3, 7 days).
Pure functions over arrays, so the math is testable without a clock or a database;
``RecencySums`` keeps the same mean as running sums, so a new record costs O(1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import ConfigDict, Field

from trustroute.profiles.validation import NumbersNotBools

SECONDS_PER_DAY = 86_400.0


#: Records per (agent, task type) profile window.
WINDOW_SIZE = 100


class RecencySettings(NumbersNotBools):
    """How fast evidence ages when computing expertise (config key ``profiles.recency``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_constant_days: float = Field(default=7.0, gt=0, allow_inf_nan=False)
    #: Bounded so that boosted weights and their sums stay finite, nonzero numbers.
    boost: float = Field(default=3.0, ge=1e-3, le=1e3, allow_inf_nan=False)
    boost_window_days: float = Field(default=7.0, ge=0, allow_inf_nan=False)
    window_size: int = Field(default=WINDOW_SIZE, ge=1)


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



#: Exponents (in time constants) within which the running sums stay exact: exp() of
#: +-700 is finite and well above the smallest normal float.
_EXP_RANGE = 700.0
#: Updates folded into the running sums before they are drawn again, which bounds
#: their rounding error (each update adds about one ulp of the sum) near 1e-13.
_MAX_UPDATES = 256


@dataclass(slots=True)
class RecencySums:
    """Recency-weighted expertise of a window, kept as running sums.

    All weights decay by the same factor as time passes, so the weighted mean is a ratio
    of sums of ``exp((t - anchor) / tau)`` (times the quality above): the decay since
    ``anchor`` cancels. Only two things change the ratio: an entry entering or leaving
    the window, and an entry's age crossing the boost window. The sums are drawn at
    ``since`` (``of``), with the entries boosted then summed apart; ``add`` folds one
    entry in (``sign`` -1 takes it out). ``expertise(now)`` is exact until ``until``,
    the first moment a boosted entry's age crosses the boost window; before ``since``,
    past ``until``, with an entry in the future (its age counts as 0), after
    ``_MAX_UPDATES`` updates, or where weights would over- or underflow, it gives None:
    draw the sums again.
    """

    settings: RecencySettings
    since: float  # POSIX seconds: when the sums were drawn, and the weights' anchor
    until: float = math.inf  # the first boost crossing after ``since``
    newest: float = -math.inf  # the newest timestamp folded in
    weight: float = 0.0  # sum of exp((t - since) / tau) over the entries
    weighted: float = 0.0  # the same, times quality
    boosted: float = 0.0  # ``weight`` over the entries boosted at ``since``
    boosted_weighted: float = 0.0
    count: int = 0
    updates: int = 0

    @classmethod
    def of(cls, entries: Iterable[tuple[float, float]], now: float,
           settings: RecencySettings) -> RecencySums:
        """The sums of (timestamp, quality) ``entries`` (POSIX seconds) drawn at ``now``."""
        sums = cls(settings, now)
        for timestamp, quality in entries:
            sums.add(timestamp, quality)
        sums.updates = 0
        return sums

    def add(self, timestamp: float, quality: float, sign: int = 1) -> None:
        """Fold one entry in (``sign`` 1) or take it out (-1)."""
        s = self.settings
        exponent = (timestamp - self.since) / (s.time_constant_days * SECONDS_PER_DAY)
        if abs(exponent) > _EXP_RANGE:
            self.until = -math.inf  # no longer exact anywhere
            return
        weight = sign * math.exp(exponent)
        self.weight += weight
        self.weighted += weight * quality
        self.count += sign
        self.updates += 1
        edge = timestamp + s.boost_window_days * SECONDS_PER_DAY
        if self.since < edge:  # boosted at ``since``
            self.boosted += weight
            self.boosted_weighted += weight * quality
            self.until = min(self.until, edge)
        self.newest = max(self.newest, timestamp)

    def span(self) -> tuple[float, float]:
        """The moments (from, until) within which ``expertise`` is exact."""
        if self.updates > _MAX_UPDATES:
            return math.inf, -math.inf
        until = self.until
        if self.count > 0:  # past this, every weight underflows in the reference pass
            tau = self.settings.time_constant_days * SECONDS_PER_DAY
            until = min(until, self.newest + _EXP_RANGE * tau)
        return max(self.since, self.newest), until

    def expertise(self, now: float) -> float | None:
        """The recency-weighted mean quality at ``now`` (0.0 without evidence), or
        None where the sums are not exact (see the class)."""
        start, until = self.span()
        if not start <= now < until:
            return None
        if self.count <= 0:
            return 0.0
        extra = self.settings.boost - 1.0
        total = self.weight + extra * self.boosted
        if total <= 0.0:
            return None
        mean = (self.weighted + extra * self.boosted_weighted) / total
        return min(1.0, max(0.0, mean))  # a mean of values in [0, 1], minus rounding error

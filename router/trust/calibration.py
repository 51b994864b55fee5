"""Calibration: make a stated confidence mean what it says.

A strategy's success probability is a model's belief; a router that says "80%" should
see about 80% of those decisions succeed. ``CalibrationMap`` learns, from decisions
joined with their outcomes, how predicted probabilities translate into realised success
rates, and corrects new predictions accordingly: per equal-width bucket, the correction
``realised - predicted`` is shrunk toward 0 by ``prior_strength`` pseudo-observations,
interpolated between buckets and forgotten over ``horizon`` outcomes (the defaults and
their reasons: docs/trust.md, "Calibrated confidence").

Also here: the reliability table and the calibration report over logged decisions; the
Brier score and the expected calibration error (ECE) are in ``trustroute.router.stats``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import Field, field_validator

from trustroute.router.stats import brier_score, expected_calibration_error
from trustroute.router.trust.scores import check_unit
from trustroute.router.trust.settings import Settings


class CalibrationSettings(Settings):
    """How the calibration map learns (config ``trust.calibration``; the reasons for
    the defaults are in docs/trust.md)."""

    buckets: int = Field(default=10, ge=1, le=1000)
    prior_strength: float = Field(default=20.0, ge=0)
    min_count: int = Field(default=10, ge=0)
    horizon: float = Field(default=1000.0, ge=0)  # effective memory in outcomes; 0: forever

    @field_validator("horizon")
    @classmethod
    def _horizon(cls, value: float) -> float:
        if 0 < value < 1:
            raise ValueError("horizon must be 0 (never forget) or >= 1 outcomes")
        return value


def bucket_of(p: float, buckets: int) -> int:
    """Index of the equal-width bucket holding ``p`` (1.0 falls in the last one)."""
    return min(buckets - 1, int(p * buckets))


class CalibrationMap:
    """Bucketed, shrunk, forgetting map from predicted probability to realised rate.

    ``update`` is O(buckets) and ``__call__`` is O(1), so the router can refresh the map
    on every recorded outcome and apply it on every decision.
    """

    def __init__(self, settings: CalibrationSettings | None = None) -> None:
        self.settings = settings or CalibrationSettings()
        b = self.settings.buckets
        self._n = [0.0] * b
        self._pred = [0.0] * b
        self._out = [0.0] * b
        self._anchor = [(i + 0.5) / b for i in range(b)]
        self._shift = [0.0] * b
        self._keep = 1.0 - 1.0 / self.settings.horizon if self.settings.horizon else 1.0

    # -- learning ----------------------------------------------------------------
    def update(self, predicted: float, success: bool) -> None:
        """Fold one decision's predicted probability and its realised outcome in."""
        p = check_unit(predicted, "predicted")
        b = bucket_of(p, self.settings.buckets)
        forgets = self._keep < 1.0
        if forgets:  # every bucket's evidence fades, so every correction moves
            self._n = [x * self._keep for x in self._n]
            self._pred = [x * self._keep for x in self._pred]
            self._out = [x * self._keep for x in self._out]
        self._n[b] += 1.0
        self._pred[b] += p
        self._out[b] += 1.0 if success else 0.0
        for i in range(len(self._n)) if forgets else (b,):
            self._refresh(i)

    def _refresh(self, b: int) -> None:
        n, s = self._n[b], self.settings
        self._anchor[b] = mean = self._pred[b] / n if n > 0.0 else (b + 0.5) / s.buckets
        self._shift[b] = 0.0
        if n > 0.0 and n >= s.min_count:  # fewer outcomes correct nothing
            self._shift[b] = n / (n + s.prior_strength) * (self._out[b] / n - mean)

    # -- applying ----------------------------------------------------------------
    def __call__(self, predicted: float) -> float:
        """The calibrated probability for a raw prediction (identity without data)."""
        p = check_unit(predicted, "predicted")
        b = bucket_of(p, len(self._shift))
        anchor = self._anchor[b]
        j = b + 1 if p >= anchor else b - 1
        shift = self._shift[b]
        if 0 <= j < len(self._shift):
            other = self._anchor[j]
            if other != anchor:
                t = (p - anchor) / (other - anchor)
                t = 0.0 if t < 0.0 else 1.0 if t > 1.0 else t  # float noise at equal anchors
                shift += t * (self._shift[j] - shift)
        value = p + shift
        return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value

    # -- persistence -------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The learned sums, JSON-ready (what the store keeps between runs)."""
        return {"buckets": len(self._n), "n": list(self._n), "pred": list(self._pred),
                "out": list(self._out)}

    def load_state(self, state: dict[str, Any]) -> bool:
        """Restore sums saved by ``state``; False (map unchanged) when they do not fit
        these settings (another bucket count) or are malformed."""
        b = len(self._n)
        try:
            n, pred, out = ([float(x) for x in state[k]] for k in ("n", "pred", "out"))
            fits = int(state["buckets"]) == b == len(n) == len(pred) == len(out)
        except (KeyError, TypeError, ValueError):
            return False
        if not fits or any(not math.isfinite(x) or x < 0 for x in (*n, *pred, *out)):
            return False
        self._n, self._pred, self._out = n, pred, out
        for i in range(b):
            self._refresh(i)
        return True

    @property
    def is_identity(self) -> bool:
        """True while no bucket has enough evidence to correct anything."""
        return not any(self._shift)

    def buckets(self) -> list[tuple[float, float, float]]:
        """Per bucket: (discounted count, mean predicted, correction)."""
        return [(n, a, s) for n, a, s in zip(self._n, self._anchor, self._shift, strict=True)]


# -- measuring ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReliabilityRow:
    """One bucket of a reliability table."""

    lower: float
    upper: float
    predicted: float  # mean predicted probability in the bucket
    realised: float  # observed success rate in the bucket
    count: int

    @property
    def label(self) -> str:
        """The bucket as text, e.g. ``0.7-0.8``."""
        return f"{self.lower:.1f}-{self.upper:.1f}"

    @property
    def gap(self) -> float:
        """realised - predicted (positive: under-confident)."""
        return self.realised - self.predicted


def reliability_table(predicted: Sequence[float], outcomes: Sequence[bool],
                      buckets: int = 10) -> list[ReliabilityRow]:
    """Non-empty equal-width buckets with mean predicted, realised rate and count."""
    if len(predicted) != len(outcomes):
        raise ValueError(f"predicted ({len(predicted)}) and outcomes ({len(outcomes)}) "
                         f"differ in length")
    # a map that neither shrinks nor forgets: its corrections are realised - predicted
    exact = CalibrationMap(CalibrationSettings(buckets=buckets, prior_strength=0,
                                               min_count=0, horizon=0))
    for p, o in zip(predicted, outcomes, strict=True):
        exact.update(p, o)
    return [ReliabilityRow(i / buckets, (i + 1) / buckets, mean, mean + gap, round(n))
            for i, (n, mean, gap) in enumerate(exact.buckets()) if n]


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """How honest the stated confidences were, over decisions with known outcomes."""

    decisions: int  # logged decisions (with or without outcome)
    with_outcome: int
    table: list[ReliabilityRow]
    brier: float
    ece: float
    abstained: int  # decisions flagged abstained (with or without outcome)
    abstained_with_outcome: int
    abstention_rate: float  # share of decisions that abstained
    abstained_failure_rate: float  # how often abstained decisions (routed anyway) failed
    answered_failure_rate: float  # how often the others failed (for comparison)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**{k: v for k, v in asdict(self).items() if k != "table"},
                "reliability": [{"bucket": r.label, "predicted": r.predicted,
                                 "realised": r.realised, "count": r.count} for r in self.table]}


def calibration_report(rows: Iterable[tuple[float | None, bool | None, bool]],
                       buckets: int = 10) -> CalibrationReport:
    """Report over (confidence, success or None, abstained) triples."""
    decided = list(rows)
    known = [(c, bool(s), bool(a)) for c, s, a in decided if c is not None and s is not None]
    preds, outs = [c for c, _, _ in known], [s for _, s, _ in known]
    return CalibrationReport(
        decisions=len(decided), with_outcome=len(known),
        table=reliability_table(preds, outs, buckets),  # means over nothing are NaN
        brier=brier_score(preds, outs) if known else math.nan,
        ece=expected_calibration_error(preds, outs, buckets) if known else math.nan,
        abstained=sum(bool(a) for _, _, a in decided),
        abstained_with_outcome=sum(a for _, _, a in known),
        abstention_rate=_rate([bool(a) for _, _, a in decided]),
        abstained_failure_rate=_rate([not s for _, s, a in known if a]),
        answered_failure_rate=_rate([not s for _, s, a in known if not a]))


def _rate(flags: list[bool]) -> float:
    """The share of ``flags`` that are true; NaN of none (``--json``: null)."""
    return sum(flags) / len(flags) if flags else math.nan

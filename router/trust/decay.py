"""Trust decay math for the weekly lifecycle job (pure: time is passed in).

A pair unseen for ``unseen_days`` gets one more week of decay added to the offsets
subtracted from its three scores (``trust_scores``); the job is keyed by ISO week so it
runs at most once a week. A pair deprecated for more than ``delete_after_days`` is due
for deletion (its history is archived by the store, not lost).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from pydantic import Field

from trustroute.profiles.trust_counts import TrustCounts
from trustroute.router.trust.scores import DECIMALS, DEPRECATED_BELOW
from trustroute.router.trust.settings import Settings


class DecaySettings(Settings):
    """The weekly decay job (config ``trust.decay``; the reference values by default)."""

    unseen_days: float = Field(default=7.0, ge=0)
    frequency: float = Field(default=0.02, ge=0, le=1)
    effectiveness: float = Field(default=0.01, ge=0, le=1)
    human: float = Field(default=0.005, ge=0, le=1)
    #: the lifecycle's mark; the tier policy excludes the deprecated tier (below 0.2)
    deprecate_below: float = Field(default=DEPRECATED_BELOW, ge=0, le=1)
    delete_after_days: float = Field(default=30.0, ge=0)


def iso_week(moment: datetime) -> str:
    """The ISO week a moment falls in, e.g. ``2025-W07`` (the decay job's idempotency key)."""
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def is_unseen(counts: TrustCounts, now: datetime, settings: DecaySettings) -> bool:
    """True when no evidence about the pair arrived in the last ``unseen_days``."""
    return counts.last_seen is None or \
        (now - counts.last_seen).total_seconds() >= settings.unseen_days * 86_400.0


def decay_once(counts: TrustCounts, settings: DecaySettings) -> TrustCounts:
    """A copy with one week's decay added to the offsets (each offset capped at 1)."""
    def added(offset: float, step: float) -> float:  # decimals: 5 x 0.02 is 0.1
        return min(1.0, round(offset + step, DECIMALS))

    return replace(
        counts, frequency_decay=added(counts.frequency_decay, settings.frequency),
        effectiveness_decay=added(counts.effectiveness_decay, settings.effectiveness),
        human_decay=added(counts.human_decay, settings.human))


def due_for_deletion(counts: TrustCounts, now: datetime, settings: DecaySettings) -> bool:
    """True when the pair has been deprecated for more than ``delete_after_days``."""
    return counts.deprecated_at is not None and \
        (now - counts.deprecated_at).total_seconds() > settings.delete_after_days * 86_400.0

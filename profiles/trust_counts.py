"""Trust evidence per (agent, task type): plain counters and increments to them.

``TrustCounts`` is what is stored per pair (the scores are derived from it by
``trustroute.router.trust.scores``); ``TrustDelta`` is a change to it, applied to the
in-memory counts at once and written later as a server-side increment, so several
routers against one server add up instead of overwriting each other. Both carry the
same integer ``Counters``: a delta's are increments, added the same way everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

#: An (agent id, task type) pair: what trust is kept for.
Pair = tuple[str, str]


@dataclass(slots=True, kw_only=True)
class Counters:
    """The integer evidence counters (keyword-only, in their stored, packed order)."""

    observations: int = 0
    contradictions: int = 0
    positive: int = 0
    negative: int = 0
    neutral: int = 0
    approvals: int = 0
    rejections: int = 0

    def add(self, increments: Counters) -> None:
        """Add another set of counters to these."""
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(increments, name))


#: The integer counters, in their stored (packed) order.
COUNTERS = tuple(f.name for f in fields(Counters))


@dataclass(slots=True)
class TrustCounts(Counters):
    """The evidence behind one pair's scores, plus the lifecycle's decay offsets.

    The ``*_decay`` offsets are accumulated by the weekly decay job while the pair is
    unseen and subtracted from its scores; fresh evidence clears them.
    """

    reviewed: bool = False
    frequency_decay: float = 0.0
    effectiveness_decay: float = 0.0
    human_decay: float = 0.0
    last_seen: datetime | None = None
    deprecated_at: datetime | None = None


@dataclass(slots=True)
class TrustDelta(Counters):
    """Increments for one pair, accumulated in memory and written in one batch."""

    agent_id: str
    task_type: str
    reviewed: bool | None = None  # None: leave as stored
    fresh: bool = False  # new evidence arrived: clear the decay offsets
    restored: bool = False  # composite back above the deprecation line: clear the mark
    at: datetime | None = None  # when the evidence was seen (moves ``last_seen``)
    tier: str | None = None  # the tier after these changes, when known

    @property
    def pair(self) -> Pair:
        """(agent id, task type)."""
        return self.agent_id, self.task_type

    def apply_to(self, counts: TrustCounts) -> None:
        """What the store does with this delta, done to in-memory counts."""
        counts.add(self)
        if self.reviewed is not None:
            counts.reviewed = self.reviewed
        if self.fresh:
            counts.frequency_decay = counts.effectiveness_decay = counts.human_decay = 0.0
        if self.restored:
            counts.deprecated_at = None
        if self.at is not None and (counts.last_seen is None or self.at > counts.last_seen):
            counts.last_seen = self.at

    def merge(self, later: TrustDelta) -> None:
        """Fold a later delta of the same pair into this one."""
        self.add(later)
        self.fresh = self.fresh or later.fresh
        self.restored = self.restored or later.restored
        if later.reviewed is not None:
            self.reviewed = later.reviewed
        if later.at is not None and (self.at is None or later.at > self.at):
            self.at = later.at
        self.tier = later.tier or self.tier

"""Trust evidence per (agent, task type): plain counters and changes to them.

``TrustCounts`` is a pair's evidence (the scores are derived from it by
``trustroute.router.trust.scores``); it is a projection of the log, folded by every
router from executions and from what people and signals said. ``TrustDelta`` is what one
log row adds. Folding deltas gives the same counts in any order: counters add up,
``last_seen`` is the newest evidence, ``reviewed`` is what the latest verdict said, and
the lifecycle's decay offsets apply only while no evidence newer than the decay exists.
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
    """The evidence behind one pair's scores, plus the lifecycle job's marks.

    The ``*_decay`` offsets are accumulated by the weekly decay job while the pair is
    unseen and subtracted from its scores; they count only while ``last_seen`` is not
    after ``decayed_at`` (evidence newer than the decay clears them).
    """

    reviewed: bool = False
    reviewed_at: datetime | None = None  # when the verdict that set ``reviewed`` was given
    frequency_decay: float = 0.0
    effectiveness_decay: float = 0.0
    human_decay: float = 0.0
    last_seen: datetime | None = None
    deprecated_at: datetime | None = None
    decayed_at: datetime | None = None

    def set_decay(self, offsets: tuple[float, float, float], decayed_at: datetime | None,
                  deprecated_at: datetime | None) -> None:
        """Put the lifecycle job's marks in place (offsets count only while unseen)."""
        self.decayed_at, self.deprecated_at = decayed_at, deprecated_at
        if self.last_seen is not None and decayed_at is not None and \
                self.last_seen > decayed_at:
            offsets = (0.0, 0.0, 0.0)
        self.frequency_decay, self.effectiveness_decay, self.human_decay = offsets


@dataclass(slots=True)
class TrustDelta(Counters):
    """What one log row adds to one pair."""

    agent_id: str
    task_type: str
    reviewed: bool | None = None  # None: leave as it is
    at: datetime | None = None  # when the evidence was seen (moves ``last_seen``)

    @property
    def pair(self) -> Pair:
        """(agent id, task type)."""
        return self.agent_id, self.task_type

    def apply_to(self, counts: TrustCounts) -> None:
        """Add this delta to ``counts``; evidence newer than the last decay clears it."""
        counts.add(self)
        if self.reviewed is not None and (self.at is None or counts.reviewed_at is None
                                          or self.at >= counts.reviewed_at):
            counts.reviewed = self.reviewed  # the latest verdict wins, in any fold order
            counts.reviewed_at = self.at
        if self.at is not None:
            if counts.last_seen is None or self.at > counts.last_seen:
                counts.last_seen = self.at
            if counts.decayed_at is None or self.at > counts.decayed_at:
                counts.frequency_decay = counts.effectiveness_decay = 0.0
                counts.human_decay = 0.0

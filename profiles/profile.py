"""Learning profile of one (agent, task type) pair: counts, expertise, confidence.

``ProfileState`` is the mutable aggregate kept in memory and mirrored in the store;
``TaskTypeProfile`` is the immutable snapshot handed to users. Both are pure: time is
passed in, nothing here touches I/O.

- expertise: recency-weighted mean quality over the last ``window_size`` records
  (see ``trustroute.profiles.recency``);
- confidence: ``min(1, executions_total / confidence_ramp)`` (ramp 20 by default), so
  one lucky run cannot outrank an established record;
- adjusted_score: ``expertise x confidence``.

``avg_quality`` over no judged run (none yet, or every run awaiting a verdict or never
judged) is None, as ``avg_cost`` is without a cost: not known, never 0.0. ``expertise``
and ``adjusted_score`` are ranking inputs that strategies compute with (the reference
ranking, custom strategies' ``Arm.profile``): without quality evidence they are 0.0,
the bottom of the ranking, as for a pair never run.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from trustroute.profiles.recency import (
    WINDOW_SIZE,
    RecencySettings,
    RecencySums,
    weighted_expertise,
)
from trustroute.profiles.records import ExecutionRecord, check_admissible
from trustroute.profiles.validation import NumbersNotBools

#: Executions after which a profile's record is complete: its confidence is full.
CONFIDENCE_RAMP = 20


class ProfileSettings(NumbersNotBools):
    """Parameters of the profile math (config key ``profiles``; reference values)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    confidence_ramp: int = Field(default=CONFIDENCE_RAMP, ge=1)
    recency: RecencySettings = Field(default_factory=RecencySettings)
    #: How far ahead of this host's clock a record's timestamp may be. Clocks kept by
    #: NTP agree within milliseconds; five minutes is the tolerance Kerberos and the
    #: Standard Webhooks timestamp check use for hosts that drift, and a record from
    #: further ahead would count as fresh evidence until its stamp came round.
    max_clock_skew_s: float = Field(default=300.0, ge=0, allow_inf_nan=False)
    #: Largest metadata of one record, in bytes of compact JSON. Metadata annotates a run
    #: (ids, tags, a few numbers: well under 1 KiB); 64 KiB leaves ample room while
    #: bounding what one row costs every rebuild, and an import batch of 1,000 rows to
    #: 64 MiB.
    max_metadata_bytes: int = Field(default=64 * 1024, ge=0)

    def admit(self, record: ExecutionRecord, now: datetime | None = None) -> ExecutionRecord:
        """``record`` if it may be stored; InvalidRecord naming the field and the setting."""
        return check_admissible(record, max_clock_skew_s=self.max_clock_skew_s,
                                max_metadata_bytes=self.max_metadata_bytes, now=now)


def ramp_confidence(executions: int, ramp: int = CONFIDENCE_RAMP) -> float:
    """``min(1, executions / ramp)``: how much the evidence count lets us trust a mean."""
    return min(1.0, max(executions, 0) / ramp)


@dataclass(frozen=True, slots=True)
class WindowEntry:
    """One recent outcome kept for recency weighting and drift-aware strategies.

    ``seq`` is the record's place among its task type's executions in log order (1, 2,
    ...), so strategies can age evidence by executions as well as by wall time; ``key``
    is its place in the log (``profiles.store.executions.LogKey``), which orders a
    window (bookkeeping, not evidence: left out of comparisons, and of cached
    projections once no late row can come before it).
    """

    timestamp: float
    quality: float | None  # None: no quality evidence (pending a verdict, or ignored)
    success: bool
    seq: int
    key: tuple[float, int, str] | None = field(default=None, compare=False)


@dataclass(slots=True)
class ProfileState:
    """Running aggregate for one (agent, task type); updated by ``apply``."""

    agent_id: str
    task_type: str
    window_size: int = WINDOW_SIZE
    executions_total: int = 0
    executions_successful: int = 0
    quality_sum: float = 0.0
    latency_sum_ms: float = 0.0
    cost_sum: float = 0.0
    cost_count: int = 0
    last_updated: datetime | None = None
    window: deque[WindowEntry] = field(default_factory=deque)
    #: Executions without quality evidence (pending a verdict, or ``default: ignore``);
    #: ``quality_sum`` is over the others.
    unjudged: int = 0
    #: Executions awaiting feedback (``feedback.wait_s``): counted in ``unjudged`` too.
    pending: int = 0
    # the last snapshot, its settings and the moments (POSIX s) between which it is exact
    _memo: tuple[ProfileSettings, float, float, TaskTypeProfile] | None = field(
        default=None, init=False, repr=False, compare=False)
    # the window's expertise as running sums (None: drawn at the next snapshot)
    _sums: RecencySums | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.window.maxlen != self.window_size:
            self.window = deque(self.window, maxlen=self.window_size)

    def apply(self, record: ExecutionRecord, seq: int,
              key: tuple[float, int, str] | None = None,
              evidence: tuple[float | None, bool] | None = None) -> None:
        """Fold one execution into the aggregate. The window stays in log order: an
        entry that arrives late is put in its place (and left out when the full window
        holds only newer ones). ``evidence``: (its quality evidence, whether it is
        pending) when feedback decides it (a quality of None: none yet, or none ever);
        None: the record's own quality."""
        quality, pending = evidence or (record.effective_quality, False)
        self.executions_total += 1
        self.executions_successful += int(record.success)
        self._count(quality, pending, 1)
        self.latency_sum_ms += record.latency_ms
        if record.cost is not None:
            self.cost_sum += record.cost
            self.cost_count += 1
        if self.last_updated is None or record.timestamp > self.last_updated:
            self.last_updated = record.timestamp
        entry = WindowEntry(record.timestamp.timestamp(), quality, record.success, seq, key)
        self._memo = None
        last = self.window[-1].key if self.window else None
        if key is None or last is None or key > last:
            if len(self.window) == self.window_size:
                self._fold_sums(self.window[0], -1)  # about to leave the window
            self.window.append(entry)
            self._fold_sums(entry, 1)
            return
        self._sums = None  # rare: a late entry takes its place; drawn again when read
        keys = [e.key or key for e in self.window]
        at = bisect.bisect(keys, key)
        if len(self.window) == self.window_size:
            if at == 0:
                return  # older than a full window of newer entries
            self.window.popleft()
            at -= 1
        self.window.insert(at, entry)

    def _count(self, quality: float | None, pending: bool, sign: int) -> None:
        if quality is None:
            self.unjudged += sign
            self.pending += sign * int(pending)
        else:
            self.quality_sum += sign * quality

    def _fold_sums(self, entry: WindowEntry, sign: int) -> None:
        """Fold a window entry into the running expertise sums (-1: take it out)."""
        if self._sums is not None and entry.quality is not None:
            self._sums.add(entry.timestamp, entry.quality, sign)

    def amend(self, seq: int, timestamp: float, key: tuple[float, int, str] | None,
              old: tuple[float | None, bool], new: tuple[float | None, bool]
              ) -> tuple[WindowEntry, WindowEntry] | None:
        """An execution's quality evidence changed from ``old`` to ``new`` (quality,
        pending); it keeps its place. Returns its window entry before and after, or None
        when the window no longer holds it (the aggregates change all the same)."""
        self._count(*old, -1)
        self._count(*new, 1)
        self._memo = None
        for i in range(len(self.window) - 1, -1, -1):
            entry = self.window[i]
            if (entry.key is not None and key is not None and entry.key == key) or (
                    entry.timestamp == timestamp and (entry.key is None or key is None)
                    and entry.seq == seq):
                self.window[i] = replace(entry, quality=new[0])
                self._fold_sums(entry, -1)
                self._fold_sums(self.window[i], 1)
                return entry, self.window[i]
        return None

    def shift_after(self, key: tuple[float, int, str]) -> None:
        """Add one to the seq of window entries after ``key`` (an execution of the task
        type arrived late and took its place before them)."""
        for i in range(len(self.window) - 1, -1, -1):
            entry = self.window[i]
            if entry.key is None or entry.key <= key:
                break
            self.window[i] = replace(entry, seq=entry.seq + 1)
        self._memo = None

    @property
    def avg_cost(self) -> float | None:
        """Mean recorded cost, or None when no execution reported one."""
        return self.cost_sum / self.cost_count if self.cost_count else None

    def expertise(self, now: datetime, settings: RecencySettings) -> float:
        """Recency-weighted mean quality of the window at time ``now``."""
        entries = [e for e in self.window if e.quality is not None]
        return weighted_expertise([e.quality for e in entries],  # type: ignore[misc]
                                  [e.timestamp for e in entries], now.timestamp(), settings)

    def snapshot(self, now: datetime, settings: ProfileSettings, stamp: float | None = None
                 ) -> TaskTypeProfile:
        """Immutable view with every derived number computed at ``now``.

        Expertise comes from running sums (``RecencySums``) that each record updates in
        O(1); they are drawn again from the window when they are not exact at ``now``
        (an entry's age crossed the boost window), and the reference pass over the
        window is used when an entry lies in the future. The snapshot is reused while
        no record arrives and the sums stay exact. ``stamp``: ``now.timestamp()``, when the
        caller snapshots many pairs at one moment (a decision: every candidate).
        """
        stamp = now.timestamp() if stamp is None else stamp
        memo = self._memo
        if memo is not None and memo[0] is settings and memo[1] <= stamp < memo[2]:
            return memo[3]
        sums = self._sums
        expertise = (sums.expertise(stamp) if sums is not None
                     and sums.settings is settings.recency else None)
        if sums is None or expertise is None:
            sums = RecencySums.of(
                ((e.timestamp, e.quality) for e in self.window if e.quality is not None),
                stamp, settings.recency)
            expertise = sums.expertise(stamp)
        if expertise is None:  # an entry in the future, or every one ancient
            self._memo = self._sums = None
            return self._compute_snapshot(settings, self.expertise(now, settings.recency))
        self._sums = sums
        snap = self._compute_snapshot(settings, expertise)
        self._memo = (settings, *sums.span(), snap)
        return snap

    def _compute_snapshot(self, settings: ProfileSettings, expertise: float
                          ) -> TaskTypeProfile:
        n = self.executions_total
        confidence = ramp_confidence(n, settings.confidence_ramp)
        return TaskTypeProfile(
            agent_id=self.agent_id,
            task_type=self.task_type,
            executions_total=n,
            executions_successful=self.executions_successful,
            success_rate=self.executions_successful / n if n else 0.0,
            avg_quality=self.quality_sum / judged if (judged := n - self.unjudged) else None,
            avg_latency_ms=self.latency_sum_ms / n if n else 0.0,
            avg_cost=self.avg_cost,
            last_updated=self.last_updated,
            expertise=expertise,
            confidence=confidence,
            adjusted_score=expertise * confidence,
            pending=self.pending,
        )


class TaskTypeProfile(BaseModel):
    """What trustroute has learned about one agent on one task type."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    task_type: str
    executions_total: int = 0
    executions_successful: int = 0
    success_rate: float = 0.0
    #: Mean quality over the judged runs; None without any (see the module).
    avg_quality: float | None = None
    avg_latency_ms: float = 0.0
    avg_cost: float | None = None
    last_updated: datetime | None = None
    #: Recency-weighted mean quality of the window; 0.0 without quality evidence.
    expertise: float = 0.0
    confidence: float = 0.0
    adjusted_score: float = 0.0
    #: Executions awaiting feedback (``feedback.wait_s``; docs/feedback.md).
    pending: int = 0


def empty_profile(agent_id: str, task_type: str) -> TaskTypeProfile:
    """The profile of a pair with no executions."""
    return TaskTypeProfile(agent_id=agent_id, task_type=task_type)

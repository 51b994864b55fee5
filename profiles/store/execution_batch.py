"""Planning a write of executions: everything the client can compute before the transaction.

A batch is written in one transaction. What does not depend on the stored state is
computed here, once, in Python:

- duplicates inside the batch are dropped (the first occurrence wins);
- each record gets its ordinal among the batch's records of its task type; its seq is
  the task clock's value before the batch plus that ordinal, so seqs stay contiguous;
- per (agent, task type) the profile deltas are summed and the window text of its last
  ``window_size`` records is built (older ones would be trimmed anyway).

The transaction applies the deltas as server-side increments (``+=``), never as values
read earlier by Python, so writers in several processes against one server add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store.window_format import SEPARATOR, window_entry


def record_params(record: ExecutionRecord, seq: int) -> dict[str, Any]:
    """Bound parameters of a single-record write: the columns, its seq, its profile
    deltas and its window entry (with the separator that appends it).

    Absent optional columns are left out (the statement reads them as NONE): encoding
    parameters is Python work inside the SDK, a tenth of a one-record write.
    """
    row: dict[str, Any] = {
        "record_id": record.record_id, "agent_id": record.agent_id,
        "task_type": record.task_type, "success": record.success,
        "quality": record.effective_quality, "latency_ms": record.latency_ms,
        "timestamp": record.timestamp, "seq": seq,
        "entry": f"{SEPARATOR}{window_entry(record)} {seq}",
        "successes": int(record.success),
        "cost_sum": record.cost or 0.0, "cost_count": int(record.cost is not None),
    }
    if record.cost is not None:
        row["cost"] = record.cost
    if record.decision_id is not None:
        row["decision_id"] = record.decision_id
    if record.metadata:
        row["metadata"] = record.metadata
    return row


@dataclass(slots=True)
class PairDelta:
    """What one batch adds to one (agent, task type) profile."""

    agent_id: str
    task_type: str
    task: int  # index of the task type in the batch's task list
    executions: int = 0
    successes: int = 0
    quality_sum: float = 0.0
    latency_sum_ms: float = 0.0
    cost_sum: float = 0.0
    cost_count: int = 0
    last_updated: datetime | None = None
    tail: list[tuple[ExecutionRecord, int]] = field(default_factory=list)
    """The pair's latest records with their ordinals (at most twice the window)."""

    def add(self, record: ExecutionRecord, ordinal: int, window_size: int) -> None:
        """Fold one record in."""
        self.executions += 1
        self.successes += int(record.success)
        self.quality_sum += record.effective_quality
        self.latency_sum_ms += record.latency_ms
        if record.cost is not None:
            self.cost_sum += record.cost
            self.cost_count += 1
        if self.last_updated is None or record.timestamp > self.last_updated:
            self.last_updated = record.timestamp
        self.tail.append((record, ordinal))
        if len(self.tail) > 2 * window_size:  # trim in chunks: amortised O(1) per record
            del self.tail[:-window_size]

    def params(self, window_size: int, base: int, seal: bool) -> dict[str, Any]:
        """The profile deltas and window entries as bound parameters; ``base`` is the
        pair's task clock before the batch, ``seal`` whether its tail is sealed."""
        return {
            "agent_id": self.agent_id, "task_type": self.task_type, "task": self.task,
            "executions": self.executions, "successes": self.successes,
            "quality_sum": self.quality_sum, "latency_sum_ms": self.latency_sum_ms,
            "cost_sum": self.cost_sum, "cost_count": self.cost_count,
            "last_updated": self.last_updated, "seal": seal,
            "entries": "".join(f"{SEPARATOR}{window_entry(record)} {base + ordinal}"
                               for record, ordinal in self.tail[-window_size:]),
        }


@dataclass(slots=True)
class BatchPlan:
    """A deduplicated batch with its per-task-type and per-pair aggregates."""

    records: list[ExecutionRecord]  # unique record ids, in batch order
    positions: list[int]  # index of each of ``records`` in the caller's sequence
    task_types: list[str]
    task_counts: list[int]
    placements: list[tuple[int, int]]  # per record: (task index, ordinal from 1)
    pairs: list[PairDelta]
    window_size: int

    def params(self, bases: Sequence[int], seals: Sequence[bool]) -> dict[str, Any]:
        """Bound parameters of the batch write, given each task clock before it and
        whether each pair's tail is sealed.

        Rows are kept small (encoding them is a large share of a bulk write): absent
        optional columns are left out.
        """
        rows = []
        for record, (task, ordinal) in zip(self.records, self.placements, strict=True):
            row: dict[str, Any] = {
                "record_id": record.record_id, "agent_id": record.agent_id,
                "task_type": record.task_type, "seq": bases[task] + ordinal,
                "success": record.success, "quality": record.effective_quality,
                "latency_ms": record.latency_ms, "timestamp": record.timestamp,
            }
            if record.cost is not None:
                row["cost"] = record.cost
            if record.decision_id is not None:
                row["decision_id"] = record.decision_id
            if record.metadata:
                row["metadata"] = record.metadata
            rows.append(row)
        return {
            "rows": rows,
            "pairs": [p.params(self.window_size, bases[p.task], seal)
                      for p, seal in zip(self.pairs, seals, strict=True)],
            "w": self.window_size,
        }

    @property
    def record_ids(self) -> list[str]:
        """The batch's record ids (unique)."""
        return [r.record_id for r in self.records]

    def seqs(self, bases: Sequence[int]) -> list[int]:
        """Each record's seq, given each task clock's value before this batch."""
        return [int(bases[task]) + ordinal for task, ordinal in self.placements]

    def without(self, stored: set[str]) -> BatchPlan:
        """The same batch minus records whose id is already stored (re-planned)."""
        keep = [(r, p) for r, p in zip(self.records, self.positions, strict=True)
                if r.record_id not in stored]
        return plan_batch([r for r, _ in keep], self.window_size, [p for _, p in keep])


def plan_batch(records: Sequence[ExecutionRecord], window_size: int,
               positions: Sequence[int] | None = None) -> BatchPlan:
    """Deduplicate ``records`` by record id and aggregate them per task type and pair."""
    seen: set[str] = set()
    unique: list[ExecutionRecord] = []
    kept: list[int] = []
    for index, record in enumerate(records):
        if record.record_id not in seen:
            seen.add(record.record_id)
            unique.append(record)
            kept.append(positions[index] if positions is not None else index)
    task_index: dict[str, int] = {}
    task_counts: list[int] = []
    pair_index: dict[tuple[str, str], int] = {}
    pairs: list[PairDelta] = []
    placements: list[tuple[int, int]] = []
    for record in unique:
        task = task_index.setdefault(record.task_type, len(task_counts))
        if task == len(task_counts):
            task_counts.append(0)
        task_counts[task] += 1
        pair = pair_index.setdefault((record.agent_id, record.task_type), len(pairs))
        if pair == len(pairs):
            pairs.append(PairDelta(record.agent_id, record.task_type, task))
        placements.append((task, task_counts[task]))
        pairs[pair].add(record, task_counts[task], window_size)
    return BatchPlan(unique, kept, list(task_index), task_counts, placements, pairs,
                     window_size)

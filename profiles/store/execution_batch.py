"""Planning a write of executions: everything the client can compute before the transaction.

A batch is written in one transaction. What does not depend on the stored state is
computed here, once, in Python:

- duplicates inside the batch are dropped (the first occurrence wins);
- each record gets its ordinal among the batch's records of its task type; its seq is
  the task clock's value before the batch plus that ordinal, so seqs stay contiguous;
- per (agent, task type) the batch's records are folded into a fresh ``ProfileState``
  (the same arithmetic as the profile's), whose sums are the deltas and whose window
  holds the last ``window_size`` entries (older ones would be trimmed anyway).

The transaction applies the deltas as server-side increments (``+=``), never as values
read earlier by Python, so writers in several processes against one server add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trustroute.profiles.profile import ProfileState
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store.window_format import SEPARATOR, window_entry


def row_params(record: ExecutionRecord, seq: int) -> dict[str, Any]:
    """An execution's columns as bound parameters. Absent optional columns are left out
    (the statement reads them as NONE): encoding parameters is Python work inside the
    SDK, a tenth of a one-record write."""
    row: dict[str, Any] = {
        "record_id": record.record_id, "agent_id": record.agent_id,
        "task_type": record.task_type, "success": record.success,
        "quality": record.effective_quality, "latency_ms": record.latency_ms,
        "timestamp": record.timestamp, "seq": seq,
    }
    if record.cost is not None:
        row["cost"] = record.cost
    if record.decision_id is not None:
        row["decision_id"] = record.decision_id
    if record.metadata:
        row["metadata"] = record.metadata
    return row


def record_params(record: ExecutionRecord, seq: int) -> dict[str, Any]:
    """Bound parameters of a single-record write: the columns, its profile deltas and its
    window entry (with the separator that appends it)."""
    return {**row_params(record, seq), "successes": int(record.success),
            "cost_sum": record.cost or 0.0, "cost_count": int(record.cost is not None),
            "entry": f"{SEPARATOR}{window_entry(record)} {seq}"}


def pair_params(delta: ProfileState, base: int) -> dict[str, Any]:
    """What one batch adds to one pair's profile, as bound parameters: ``delta`` is the
    batch's records of the pair folded into a fresh profile state, their seqs counted from
    the pair's task clock ``base`` before the batch."""
    return {
        "agent_id": delta.agent_id, "task_type": delta.task_type,
        "executions": delta.executions_total, "successes": delta.executions_successful,
        "quality_sum": delta.quality_sum, "latency_sum_ms": delta.latency_sum_ms,
        "cost_sum": delta.cost_sum, "cost_count": delta.cost_count,
        "last_updated": delta.last_updated,
        "entries": "".join(f"{SEPARATOR}{e.timestamp!r} {e.quality!r} {int(e.success)} "
                           f"{base + e.seq}" for e in delta.window),
    }


@dataclass(slots=True)
class BatchPlan:
    """A deduplicated batch with its per-task-type and per-pair aggregates."""

    records: list[ExecutionRecord]  # unique record ids, in batch order
    positions: list[int]  # index of each of ``records`` in the caller's sequence
    task_types: list[str]
    task_counts: list[int]
    placements: list[tuple[int, int]]  # per record: (task index, ordinal from 1)
    pairs: list[ProfileState]  # per pair, its records of the batch (seq = ordinal)
    pair_tasks: list[int]  # per pair: the index of its task type
    window_size: int

    def params(self, bases: Sequence[int]) -> dict[str, Any]:
        """Bound parameters of the batch write, given each task clock before it."""
        return {
            "rows": [row_params(record, bases[task] + ordinal)
                     for record, (task, ordinal) in zip(self.records, self.placements,
                                                        strict=True)],
            "pairs": [pair_params(p, bases[task])
                      for p, task in zip(self.pairs, self.pair_tasks, strict=True)],
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
    pairs: list[ProfileState] = []
    pair_tasks: list[int] = []
    placements: list[tuple[int, int]] = []
    for record in unique:
        task = task_index.setdefault(record.task_type, len(task_counts))
        if task == len(task_counts):
            task_counts.append(0)
        task_counts[task] += 1
        pair = pair_index.setdefault((record.agent_id, record.task_type), len(pairs))
        if pair == len(pairs):
            pairs.append(ProfileState(record.agent_id, record.task_type, window_size))
            pair_tasks.append(task)
        placements.append((task, task_counts[task]))
        pairs[pair].apply(record, task_counts[task])
    return BatchPlan(unique, kept, list(task_index), task_counts, placements, pairs,
                     pair_tasks, window_size)

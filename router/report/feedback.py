"""The report's feedback coverage: per task type, the share of executions judged and
the median delay between an execution and a verdict on it (docs/feedback.md)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from trustroute.profiles.store.report import ReportRepository


@dataclass(frozen=True)
class Coverage:
    """How much of one task type's executions feedback reached, and how late."""

    task_type: str
    executions: int
    judged: int  # executions with at least one verdict
    median_delay_s: float | None  # over verdicts; None without any

    @property
    def share(self) -> float | None:
        """Share of executions judged; None without executions."""
        return self.judged / self.executions if self.executions else None


def gather_coverage(repo: ReportRepository, task_type: str | None, since: datetime | None
                    ) -> list[Coverage]:
    """Coverage per task type with executions (``since`` limits both sides)."""
    runs: dict[str, tuple[str, datetime]] = {}  # record id -> (task type, timestamp)
    by_decision: dict[str, str] = {}
    counts: dict[str, int] = {}
    for row in repo.execution_times(task_type, since):
        runs[row["record_id"]] = (row["task_type"], row["timestamp"])
        counts[row["task_type"]] = counts.get(row["task_type"], 0) + 1
        if row.get("decision_id"):
            by_decision[row["decision_id"]] = row["record_id"]
    judged: dict[str, set[str]] = {}
    delays: dict[str, list[float]] = {}
    for v in repo.verdicts(task_type, since):
        record_id = v.get("record_id") or by_decision.get(v.get("decision_id") or "")
        if record_id not in runs:
            continue  # a decision not recorded yet, or an execution before ``since``
        tt, at = runs[record_id]
        judged.setdefault(tt, set()).add(record_id)
        delays.setdefault(tt, []).append(max(0.0, (v["at"] - at).total_seconds()))
    return [Coverage(tt, n, len(judged.get(tt, ())),
                     statistics.median(delays[tt]) if tt in delays else None)
            for tt, n in sorted(counts.items())]


def duration(seconds: float | None) -> str:
    """A delay in adaptive units: 350 ms, 4.2 s, 3.5 min, 2.0 h, 1.5 d; a dash when none."""
    if seconds is None:
        return "—"
    for unit, size in (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0), ("s", 1.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds * 1000:.0f} ms"

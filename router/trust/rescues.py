"""Contradictions: an agent failed a task and another agent then rescued it.

Convention shared with the integrations: every record for one user task carries
``metadata = {"task_id": <id>, "attempt": <int>}``. A contradiction for agent X is X
failing on task T followed by a *later* attempt on T (a higher ``attempt``; when attempts
are missing, the later record by its timestamp and id as the trust layer passes them,
else by arrival) by another agent that succeeded. Each failure is charged at
most once. The tracker is a bounded in-memory LRU over recent task ids, so it costs
nothing on the database and copes with records arriving out of order; the cached
projection carries it (``export``/``load``), so a restart between a failure and its
rescue still charges it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

#: User tasks the tracker remembers (``trust.rescue_memory``).
RESCUE_MEMORY = 10_000

Order = tuple[float | None, tuple[float, str]]  # (attempt if given, when)


class Rescue(NamedTuple):
    """A failed pair to charge a contradiction, who rescued its task, and when (the
    rescue's time, POSIX seconds; None when records came without one)."""

    agent_id: str
    task_type: str
    rescuer: str
    at: float | None


def is_later(a: Order, b: Order) -> bool:
    """True when attempt ``a`` came after ``b``: by attempt number when both carry one
    and they differ, else by when they happened."""
    if a[0] is not None and b[0] is not None and a[0] != b[0]:
        return a[0] > b[0]
    return a[1] > b[1]


@dataclass(slots=True)
class _Task:
    failures: list[tuple[Order, str, str]] = field(default_factory=list)  # order, agent, type
    successes: list[tuple[Order, str]] = field(default_factory=list)  # order, agent


class RescueTracker:
    """Remembers recent failures per user task to charge them when another agent rescues."""

    def __init__(self, capacity: int = RESCUE_MEMORY) -> None:
        self.capacity = capacity  # task ids kept (``TrustOptions.rescue_memory``)
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._arrivals = 0

    def observe(self, agent_id: str, task_type: str, success: bool,
                metadata: Mapping[str, Any], when: tuple[float, str] | None = None
                ) -> list[Rescue]:
        """Fold one record in; returns the pairs to charge a contradiction: each failed
        pair this record rescues, or this failure when it arrives after its rescue,
        dated by the rescue either way. ``when`` (the record's time and id) orders
        attempts without a number the same way whatever order records arrive in;
        without it, arrival order does."""
        given = when is not None
        task_id, attempt = metadata.get("task_id"), metadata.get("attempt")
        if isinstance(task_id, bool) or not isinstance(task_id, str | int):
            return []  # not part of a user task
        if isinstance(attempt, bool) or not isinstance(attempt, int | float):
            attempt = None  # ordered by when alone
        self._arrivals += 1
        when = when if when is not None else (float(self._arrivals), "")
        order: Order = (None if attempt is None else float(attempt), when)
        task = self._tasks.pop(str(task_id), None) or _Task()
        self._tasks[str(task_id)] = task  # the most recently used task last
        if len(self._tasks) > self.capacity:
            self._tasks.popitem(last=False)
        if success:
            task.successes.append((order, agent_id))
            rescued = [f for f in task.failures if f[1] != agent_id and is_later(order, f[0])]
            task.failures = [f for f in task.failures if f not in rescued]
            at = order[1][0] if given else None
            return [Rescue(a, t, agent_id, at) for _, a, t in rescued]
        later = [(o, a) for o, a in task.successes if a != agent_id and is_later(o, order)]
        if later:  # a failure reported after its rescue: charged as of the rescue
            (o, rescuer) = min(later, key=lambda s: (s[0][0] is None, s[0][0] or 0.0, s[0][1]))
            return [Rescue(agent_id, task_type, rescuer, o[1][0] if given else None)]
        task.failures.append((order, agent_id, task_type))
        return []

    def __len__(self) -> int:
        return len(self._tasks)

    def export(self) -> list[list[Any]]:
        """JSON-ready form: per remembered task, least recently used first, its id,
        failures and successes."""
        return [[task_id, [[[o[0], list(o[1])], a, t] for o, a, t in task.failures],
                 [[[o[0], list(o[1])], a] for o, a in task.successes]]
                for task_id, task in self._tasks.items()]

    @classmethod
    def load(cls, rows: list[list[Any]], capacity: int = RESCUE_MEMORY) -> RescueTracker:
        """A tracker from ``export()``'s rows (the most recent ``capacity`` tasks)."""
        tracker = cls(capacity)
        for task_id, failures, successes in rows[-capacity:] if capacity else ():
            tracker._tasks[task_id] = _Task(
                [(_order(o), a, t) for o, a, t in failures],
                [(_order(o), a) for o, a in successes])
        return tracker


def _order(row: list[Any]) -> Order:
    attempt, (when, record_id) = row
    return (None if attempt is None else float(attempt), (float(when), str(record_id)))

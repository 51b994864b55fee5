"""ChangeMonitor: notice when an agent's quality shifts, so its old evidence is dropped.

Discounting alone reacts to a regression only as fast as old evidence fades, which is
slow when it must also keep a stationary agent well known. So each agent's recent
outcomes (all task types, in arrival order, since its last detected change) are
tested with the multi-type GLR test of ``change_point``. When it fires, the
evidence before the change is forgotten for every task type of that agent: a regressed
agent is judged on what it does now (abandoned within tens of tasks), and a recovered
one wins back just as fast once it is tried again.

The test runs after every outcome while an agent's history is short, and every
``len / 25`` outcomes once it is long (at most 8 outcomes late, against detection
delays of tens), which keeps ``observe()`` cheap.

A detected change carries the agent's outcomes since the change point per task type
(``kept``): exactly the evidence still to be trusted.

Late verdicts (docs/feedback.md) reach the monitor through ``amend``: an outcome that
was pending joins the history when its verdict arrives (arrival order is what the test
watches: a regression revealed by late verdicts is a run of bad outcomes arriving now),
and a verdict that changes an outcome already in the history changes it in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import WindowEntry
from trustroute.router.strategies.change_point import detect_change

_STRIDE_DIVISOR = 25  # test every len/25 outcomes: at most 8 late on a 200-outcome history


@dataclass(frozen=True, slots=True)
class DetectedChange:
    """A change of one agent, and its outcomes from the change on."""

    agent_id: str
    kept: dict[str, tuple[WindowEntry, ...]]
    """Per task type, the agent's outcomes from the change on, oldest first (task types
    without one are absent)."""


#: One outcome of an agent's history; the fields after ``group`` are WindowEntry's, in order.
_OUTCOME = np.dtype([("group", np.int64), ("timestamp", float), ("quality", float),
                     ("success", bool), ("seq", np.int64)])


@dataclass(slots=True)
class AgentHistory:
    """One agent's outcomes since its last change, in arrival order (one record array)."""

    capacity: int
    types: dict[str, int] = field(default_factory=dict)  # task type -> local group id
    rows: np.ndarray = field(init=False)  # _OUTCOME records, the first ``size`` in use
    size: int = 0
    since_test: int = 0

    def __post_init__(self) -> None:
        self.rows = np.zeros(self.capacity, dtype=_OUTCOME)

    def append(self, task_type: str, entry: WindowEntry) -> None:
        """Add one outcome; when full, the oldest quarter is dropped at once."""
        if self.size == self.capacity:
            self.keep_last(self.capacity - max(1, self.capacity // 4))
        group = self.types.setdefault(task_type, len(self.types))
        self.rows[self.size] = (group, entry.timestamp, entry.quality, entry.success, entry.seq)
        self.size += 1
        self.since_test += 1

    def keep_last(self, count: int) -> None:
        """Keep only the ``count`` most recent outcomes (and renumber task types)."""
        self.rows[:count] = self.rows[self.size - count:self.size]
        self.size = count
        names = {g: t for t, g in self.types.items()}
        used, local = np.unique(self.rows["group"][:count], return_inverse=True)
        self.rows["group"][:count] = local
        self.types = {names[int(g)]: i for i, g in enumerate(used)}

    def find(self, task_type: str, seq: int) -> int | None:
        """The row of the outcome of ``task_type`` with ``seq``; None when not held."""
        group = self.types.get(task_type)
        if group is None:
            return None
        rows = self.rows[:self.size]
        hit = np.flatnonzero((rows["group"] == group) & (rows["seq"] == seq))
        return int(hit[-1]) if len(hit) else None

    def drop(self, row: int) -> None:
        """Remove one outcome (its verdict says it is no evidence after all)."""
        self.rows[row:self.size - 1] = self.rows[row + 1:self.size]
        self.size -= 1

    def due(self) -> bool:
        """True when enough new outcomes arrived since the last test."""
        return self.size >= 4 and self.since_test >= max(1, self.size // _STRIDE_DIVISOR)


class ChangeMonitor:
    """Per-agent outcome histories and the change-point test run on them."""

    def __init__(self, window: int = 200, delta: float = 0.05) -> None:
        self.window = window
        self.delta = delta
        self._history: dict[str, AgentHistory] = {}

    def add(self, agent_id: str, task_type: str, entry: WindowEntry) -> DetectedChange | None:
        """Append one outcome and, when due, test the agent's history."""
        history = self._history.get(agent_id)
        if history is None:
            history = self._history[agent_id] = AgentHistory(self.window)
        history.append(task_type, entry)
        return self._test(agent_id, history) if history.due() else None

    def amend(self, agent_id: str, task_type: str, old: WindowEntry | None,
              new: WindowEntry | None) -> DetectedChange | None:
        """A verdict changed one outcome from ``old`` to ``new`` (None: no evidence).
        An outcome the history holds is changed in place (or dropped); one it does not
        hold (it was pending) joins it now, as it arrives. Tests when due."""
        history = self._history.get(agent_id)
        row = None if history is None or old is None else history.find(task_type, old.seq)
        if history is None or row is None:  # it was pending, or forgotten with a change
            return self.add(agent_id, task_type, new) if old is None and new is not None else None
        if new is None:
            history.drop(row)
        else:
            history.rows["quality"][row] = new.quality
            history.rows["success"][row] = new.success
        history.since_test += 1
        return self._test(agent_id, history) if history.due() else None

    def _test(self, agent_id: str, history: AgentHistory) -> DetectedChange | None:
        """Run the test; on a change, keep only the outcomes from it on."""
        history.since_test = 0
        n = history.size
        rows = history.rows[:n]
        change = detect_change(rows["group"], rows["quality"], self.delta)
        if change is None:
            return None
        names = {g: t for t, g in history.types.items()}
        kept: dict[str, list[WindowEntry]] = {}
        for g, *fields in rows[change.index:].tolist():
            kept.setdefault(names[g], []).append(WindowEntry(*fields))
        history.keep_last(n - change.index)
        return DetectedChange(agent_id, {name: tuple(entries) for name, entries in kept.items()})

    def rebuild(self, book: ProfileBook) -> list[DetectedChange]:
        """Histories from a freshly loaded book's windows (merged by time), re-tested."""
        self._history = {}
        merged: dict[str, list[tuple[str, WindowEntry]]] = {}
        for state in book:
            rows = merged.setdefault(state.agent_id, [])
            rows.extend((state.task_type, e) for e in state.window if e.quality is not None)
        changes = []
        for agent_id, rows in merged.items():
            rows.sort(key=lambda row: (row[1].timestamp, row[1].seq))
            history = self._history[agent_id] = AgentHistory(self.window)
            for task_type, entry in rows[-self.window:]:
                history.append(task_type, entry)
            change = self._test(agent_id, history) if history.due() else None
            if change is not None:
                changes.append(change)
        return changes

"""ChangeMonitor: notice when an agent's quality shifts, so its old evidence is dropped.

Discounting alone reacts to a regression only as fast as old evidence fades, which is
slow when it must also keep a stationary agent well known. So each agent's recent
outcomes (all task types, in arrival order, since its last detected change) are
tested with the multi-type GLR test of ``profiles.change_point``. When it fires, the
evidence before the change is forgotten for every task type of that agent: a regressed
agent is judged on what it does now (abandoned within tens of tasks), and a recovered
one wins back just as fast once it is tried again.

The test runs after every outcome while an agent's history is short, and every
``len / 25`` outcomes once it is long (at most 8 outcomes late, against detection
delays of tens), which keeps ``observe()`` cheap on bulk imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from profiles.book import ProfileBook
from profiles.change_point import ChangePoint, detect_change

_SPLITS = 64  # candidate change points per test
_STRIDE_DIVISOR = 25  # test every len/25 outcomes: at most 8 late on a 200-outcome history


@dataclass(frozen=True, slots=True)
class DetectedChange:
    """A change of one agent: per task type, the first clock value still trusted."""

    agent_id: str
    keep_from: dict[str, int]  # task types absent here have no run after the change
    change: ChangePoint


@dataclass(slots=True)
class AgentHistory:
    """One agent's outcomes since its last change, in arrival order (arrays, no objects)."""

    capacity: int
    types: dict[str, int] = field(default_factory=dict)  # task type -> local group id
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    seqs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    size: int = 0
    since_test: int = 0

    def __post_init__(self) -> None:
        self.groups = np.zeros(self.capacity, dtype=np.int64)
        self.seqs = np.zeros(self.capacity, dtype=np.int64)
        self.values = np.zeros(self.capacity)

    def append(self, task_type: str, seq: int, quality: float) -> None:
        """Add one outcome; when full, the oldest quarter is dropped at once."""
        if self.size == self.capacity:
            self.keep_last(self.capacity - max(1, self.capacity // 4))
        group = self.types.setdefault(task_type, len(self.types))
        self.groups[self.size], self.seqs[self.size] = group, seq
        self.values[self.size] = quality
        self.size += 1
        self.since_test += 1

    def keep_last(self, count: int) -> None:
        """Keep only the ``count`` most recent outcomes (and renumber task types)."""
        start = self.size - count
        for arr in (self.groups, self.seqs, self.values):
            arr[:count] = arr[start:self.size]
        self.size = count
        names = {g: t for t, g in self.types.items()}
        used, local = np.unique(self.groups[:count], return_inverse=True)
        self.groups[:count] = local
        self.types = {names[int(g)]: i for i, g in enumerate(used)}

    def due(self) -> bool:
        """True when enough new outcomes arrived since the last test."""
        return self.size >= 4 and self.since_test >= max(1, self.size // _STRIDE_DIVISOR)


class ChangeMonitor:
    """Per-agent outcome histories and the change-point test run on them."""

    def __init__(self, window: int = 200, delta: float = 0.05) -> None:
        self.window = window
        self.delta = delta
        self._history: dict[str, AgentHistory] = {}
        self.detected: list[DetectedChange] = []  # the last 100 changes, for inspection

    def add(self, agent_id: str, task_type: str, seq: int, quality: float
            ) -> DetectedChange | None:
        """Append one outcome and, when due, test the agent's history."""
        history = self._history.get(agent_id)
        if history is None:
            history = self._history[agent_id] = AgentHistory(self.window)
        history.append(task_type, seq, quality)
        return self._test(agent_id, history) if history.due() else None

    def _test(self, agent_id: str, history: AgentHistory) -> DetectedChange | None:
        history.since_test = 0
        n = history.size
        change = detect_change(history.groups[:n], history.values[:n], self.delta,
                               max_splits=_SPLITS)
        if change is None:
            return None
        names = {g: t for t, g in history.types.items()}
        keep_from: dict[str, int] = {}
        for g, seq in zip(history.groups[change.index:n].tolist(),
                          history.seqs[change.index:n].tolist(), strict=True):
            name = names[g]
            keep_from[name] = min(keep_from.get(name, seq), seq)
        history.keep_last(n - change.index)
        detected = DetectedChange(agent_id, keep_from, change)
        self.detected = [*self.detected[-99:], detected]
        return detected

    def rebuild(self, book: ProfileBook) -> list[DetectedChange]:
        """Histories from a freshly loaded book's windows (merged by time), re-tested."""
        self._history = {}
        merged: dict[str, list[tuple[float, int, str, float]]] = {}
        for state in book:
            rows = merged.setdefault(state.agent_id, [])
            rows.extend((e.timestamp, e.seq, state.task_type, e.quality) for e in state.window)
        changes = []
        for agent_id, rows in merged.items():
            rows.sort(key=lambda row: (row[0], row[1]))
            history = self._history[agent_id] = AgentHistory(self.window)
            for _, seq, task_type, quality in rows[-self.window:]:
                history.append(task_type, seq, quality)
            if history.size >= 4:
                change = self._test(agent_id, history)
                if change is not None:
                    changes.append(change)
        return changes

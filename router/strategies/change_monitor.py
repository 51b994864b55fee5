"""ChangeMonitor: notice when an agent's quality shifts, so its old evidence is dropped.

Discounting alone reacts to a regression only as fast as old evidence fades, which is
slow when it must also keep a stationary agent well known. So each agent's recent
outcomes (all task types, in arrival order, since its last detected change) are
re-tested after every outcome with the multi-type GLR test of
``profiles.change_point``. When it fires, the evidence before the change is forgotten
for every task type of that agent: a regressed agent is judged on what it does now
(abandoned within tens of tasks), and a recovered one wins back just as fast once it
is tried again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from profiles.book import ProfileBook
from profiles.change_point import ChangePoint, detect_change


@dataclass(frozen=True, slots=True)
class Outcome:
    """One outcome in an agent's monitored history."""

    task_type: str
    seq: int
    quality: float


@dataclass(frozen=True, slots=True)
class DetectedChange:
    """A change of one agent: per task type, the first clock value still trusted."""

    agent_id: str
    keep_from: dict[str, int]  # task types absent here have no run after the change
    change: ChangePoint


class ChangeMonitor:
    """Per-agent outcome histories and the change-point test run on them."""

    def __init__(self, window: int = 200, delta: float = 0.01) -> None:
        self.window = window
        self.delta = delta
        self._history: dict[str, deque[Outcome]] = {}
        self._types: dict[str, int] = {}
        self.detected: list[DetectedChange] = []  # most recent last, for inspection

    def _type_id(self, task_type: str) -> int:
        return self._types.setdefault(task_type, len(self._types))

    def add(self, agent_id: str, task_type: str, seq: int, quality: float
            ) -> DetectedChange | None:
        """Append one outcome and test the agent's history; a change is returned once."""
        history = self._history.get(agent_id)
        if history is None:
            history = self._history[agent_id] = deque(maxlen=self.window)
        history.append(Outcome(task_type, seq, quality))
        return self._test(agent_id, history)

    def _test(self, agent_id: str, history: deque[Outcome]) -> DetectedChange | None:
        if len(history) < 4:
            return None
        groups = np.fromiter((self._type_id(o.task_type) for o in history), np.int64,
                             len(history))
        values = np.fromiter((o.quality for o in history), float, len(history))
        change = detect_change(groups, values, self.delta)
        if change is None:
            return None
        recent = list(history)[change.index:]
        history.clear()
        history.extend(recent)
        keep_from: dict[str, int] = {}
        for o in recent:
            keep_from[o.task_type] = min(keep_from.get(o.task_type, o.seq), o.seq)
        detected = DetectedChange(agent_id, keep_from, change)
        self.detected = [*self.detected[-99:], detected]
        return detected

    def rebuild(self, book: ProfileBook) -> list[DetectedChange]:
        """Histories from a freshly loaded book's windows (merged by time), re-tested."""
        self._history = {}
        merged: dict[str, list[tuple[float, int, Outcome]]] = {}
        for state in book:
            for e in state.window:
                merged.setdefault(state.agent_id, []).append(
                    (e.timestamp, e.seq, Outcome(state.task_type, e.seq, e.quality)))
        changes = []
        for agent_id, items in merged.items():
            items.sort(key=lambda item: (item[0], item[1]))
            history = self._history[agent_id] = deque((o for _, _, o in items),
                                                      maxlen=self.window)
            change = self._test(agent_id, history)
            if change is not None:
                changes.append(change)
        return changes

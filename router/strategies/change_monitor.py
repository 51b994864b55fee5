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
delays of tens), which keeps ``observe()`` cheap. A batch (``add_many``) runs the same
tests at the same outcomes, all of an agent's windows at once (``change_scan``),
and reports each change with the batch position it fired at.

A detected change carries the agent's outcomes since the change point per task type
(``kept``): exactly the window entries still to be trusted, known without reading
the profile book as of that outcome (a batch's book is already past it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import WindowEntry
from trustroute.router.strategies.change_point import ChangePoint, detect_change
from trustroute.router.strategies.change_scan import ScanWorkspace, window_margins

_SPLITS = 64  # candidate change points per test
_STRIDE_DIVISOR = 25  # test every len/25 outcomes: at most 8 late on a 200-outcome history
_SCAN_BLOCK = 64  # windows scanned per array pass in add_many (work wasted after a change)
_SCAN_SLACK = 1e-6  # re-test exactly when a scanned margin is this close to firing


def due_for_test(size: int, since_test: int) -> bool:
    """Whether a history of ``size`` outcomes, ``since_test`` of them new, is tested now."""
    return size >= 4 and since_test >= max(1, size // _STRIDE_DIVISOR)


@dataclass(frozen=True, slots=True)
class DetectedChange:
    """A change of one agent: per task type, the first clock value still trusted."""

    agent_id: str
    keep_from: dict[str, int]  # task types absent here have no run after the change
    change: ChangePoint
    kept: dict[str, tuple[WindowEntry, ...]] = field(default_factory=dict)
    """Per task type, the agent's outcomes from the change on, oldest first."""


@dataclass(slots=True)
class AgentHistory:
    """One agent's outcomes since its last change, in arrival order (arrays, no objects)."""

    capacity: int
    types: dict[str, int] = field(default_factory=dict)  # task type -> local group id
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    seqs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    stamps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # POSIX seconds
    successes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    size: int = 0
    since_test: int = 0

    def __post_init__(self) -> None:
        self.groups = np.zeros(self.capacity, dtype=np.int64)
        self.seqs = np.zeros(self.capacity, dtype=np.int64)
        self.values = np.zeros(self.capacity)
        self.stamps = np.zeros(self.capacity)
        self.successes = np.zeros(self.capacity, dtype=bool)

    def append(self, task_type: str, seq: int, quality: float, timestamp: float,
               success: bool) -> None:
        """Add one outcome; when full, the oldest quarter is dropped at once."""
        if self.size == self.capacity:
            self.keep_last(self.capacity - max(1, self.capacity // 4))
        group = self.types.setdefault(task_type, len(self.types))
        i = self.size
        self.groups[i], self.seqs[i], self.values[i] = group, seq, quality
        self.stamps[i], self.successes[i] = timestamp, success
        self.size += 1
        self.since_test += 1

    def extend(self, task_types: Sequence[str], seqs: np.ndarray, values: np.ndarray,
               stamps: np.ndarray, successes: np.ndarray) -> None:
        """``append`` each outcome in turn (same state), copying runs of them at once."""
        done, n = 0, len(task_types)
        while done < n:
            if self.size == self.capacity:
                self.keep_last(self.capacity - max(1, self.capacity // 4))
            take = min(n - done, self.capacity - self.size)
            part, into = slice(done, done + take), slice(self.size, self.size + take)
            types = self.types
            self.groups[into] = [types.setdefault(t, len(types)) for t in task_types[part]]
            self.seqs[into], self.values[into] = seqs[part], values[part]
            self.stamps[into], self.successes[into] = stamps[part], successes[part]
            self.size += take
            self.since_test += take
            done += take

    def keep_last(self, count: int) -> None:
        """Keep only the ``count`` most recent outcomes (and renumber task types)."""
        start = self.size - count
        for arr in (self.groups, self.seqs, self.values, self.stamps, self.successes):
            arr[:count] = arr[start:self.size]
        self.size = count
        names = {g: t for t, g in self.types.items()}
        used, local = np.unique(self.groups[:count], return_inverse=True)
        self.groups[:count] = local
        self.types = {names[int(g)]: i for i, g in enumerate(used)}

    def due(self) -> bool:
        """True when enough new outcomes arrived since the last test."""
        return due_for_test(self.size, self.since_test)


class ChangeMonitor:
    """Per-agent outcome histories and the change-point test run on them."""

    def __init__(self, window: int = 200, delta: float = 0.05) -> None:
        self.window = window
        self.delta = delta
        self._history: dict[str, AgentHistory] = {}
        self._scan = ScanWorkspace()
        self.detected: list[DetectedChange] = []  # the last 100 changes, for inspection

    def add(self, agent_id: str, task_type: str, seq: int, quality: float,
            timestamp: float, success: bool) -> DetectedChange | None:
        """Append one outcome and, when due, test the agent's history."""
        history = self._history.get(agent_id)
        if history is None:
            history = self._history[agent_id] = AgentHistory(self.window)
        history.append(task_type, seq, quality, timestamp, success)
        if not history.due():
            return None
        return self._remember(self._test(agent_id, history))

    def add_many(self, agent_ids: Sequence[str], task_types: Sequence[str], seqs: np.ndarray,
                 qualities: np.ndarray, stamps: np.ndarray, successes: np.ndarray
                 ) -> list[tuple[int, DetectedChange]]:
        """``add`` each outcome in turn (same tests, same changes); returns each change
        with the position of the outcome it fired at, in order."""
        rows: dict[str, list[int]] = {}
        for i, agent_id in enumerate(agent_ids):
            rows.setdefault(agent_id, []).append(i)
        found = []
        for agent_id, positions in rows.items():
            at = np.asarray(positions)
            found.extend(self._add_agent(agent_id, positions, [task_types[i] for i in positions],
                                         seqs[at], qualities[at], stamps[at], successes[at]))
        found.sort(key=lambda item: item[0])
        for _, change in found:
            self._remember(change)
        return found

    def _add_agent(self, agent_id: str, positions: list[int], task_types: list[str],
                   seqs: np.ndarray, values: np.ndarray, stamps: np.ndarray,
                   successes: np.ndarray) -> list[tuple[int, DetectedChange]]:
        """One agent's outcomes of a batch: find when tests are due (as ``add``), scan
        their windows at once, and run the exact test where one may fire."""
        history = self._history.get(agent_id)
        if history is None:
            history = self._history[agent_id] = AgentHistory(self.window)
        found, done, n = [], 0, len(task_types)
        while done < n:
            due, since = self._due_tests(history, n - done)
            firing = self._first_firing(history, due, task_types[done:], values[done:])
            if firing is None:
                history.extend(task_types[done:], seqs[done:], values[done:], stamps[done:],
                               successes[done:])
                history.since_test = since
                break
            end = done + firing + 1
            history.extend(task_types[done:end], seqs[done:end], values[done:end],
                           stamps[done:end], successes[done:end])
            change = self._test(agent_id, history)
            if change is not None:
                found.append((positions[end - 1], change))
            done = end
        return found

    def _due_tests(self, history: AgentHistory, count: int) -> tuple[list[tuple[int, int]], int]:
        """(outcome index, history size) of each test ``add`` would run over the next
        ``count`` outcomes if none fired, and ``since_test`` after them."""
        size, since, capacity = history.size, history.since_test, history.capacity
        due = []
        for i in range(count):
            if size == capacity:
                size = capacity - max(1, capacity // 4)
            size += 1
            since += 1
            if due_for_test(size, since):
                due.append((i, size))
                since = 0
        return due, since

    def _first_firing(self, history: AgentHistory, due: list[tuple[int, int]],
                      task_types: list[str], values: np.ndarray) -> int | None:
        """Index (into the new outcomes) of the first due test that may fire, or None."""
        if not due:
            return None
        types = dict(history.types)
        n = history.size
        groups = np.concatenate((history.groups[:n], np.fromiter(
            (types.setdefault(t, len(types)) for t in task_types), np.int64, len(task_types))))
        sequence = np.concatenate((history.values[:n], values))
        for start in range(0, len(due), _SCAN_BLOCK):
            block = due[start:start + _SCAN_BLOCK]
            ends = np.array([n + i + 1 for i, _ in block])
            sizes = np.array([size for _, size in block])
            margins = window_margins(groups, sequence, ends, sizes, self.delta, _SPLITS,
                                     self._scan)
            close = np.flatnonzero(margins > -_SCAN_SLACK)
            if len(close):
                return block[int(close[0])][0]
        return None

    def _remember(self, change: DetectedChange | None) -> DetectedChange | None:
        if change is not None:
            self.detected = [*self.detected[-99:], change]
        return change

    def _test(self, agent_id: str, history: AgentHistory) -> DetectedChange | None:
        history.since_test = 0
        n = history.size
        change = detect_change(history.groups[:n], history.values[:n], self.delta,
                               max_splits=_SPLITS)
        if change is None:
            return None
        names = {g: t for t, g in history.types.items()}
        keep_from: dict[str, int] = {}
        kept: dict[str, list[WindowEntry]] = {}
        since = slice(change.index, n)
        for g, seq, stamp, value, success in zip(
                history.groups[since].tolist(), history.seqs[since].tolist(),
                history.stamps[since].tolist(), history.values[since].tolist(),
                history.successes[since].tolist(), strict=True):
            name = names[g]
            keep_from[name] = min(keep_from.get(name, seq), seq)
            kept.setdefault(name, []).append(WindowEntry(stamp, value, success, seq))
        history.keep_last(n - change.index)
        return DetectedChange(agent_id, keep_from, change,
                              {name: tuple(entries) for name, entries in kept.items()})

    def rebuild(self, book: ProfileBook) -> list[DetectedChange]:
        """Histories from a freshly loaded book's windows (merged by time), re-tested."""
        self._history = {}
        merged: dict[str, list[tuple[float, int, str, float, bool]]] = {}
        for state in book:
            rows = merged.setdefault(state.agent_id, [])
            rows.extend((e.timestamp, e.seq, state.task_type, e.quality, e.success)
                        for e in state.window)
        changes = []
        for agent_id, rows in merged.items():
            rows.sort(key=lambda row: (row[0], row[1]))
            history = self._history[agent_id] = AgentHistory(self.window)
            for stamp, seq, task_type, quality, success in rows[-self.window:]:
                history.append(task_type, seq, quality, stamp, success)
            if history.size >= 4:
                change = self._remember(self._test(agent_id, history))
                if change is not None:
                    changes.append(change)
        return changes

"""ProfileBook: the in-memory projection of the execution log that decisions read.

``select()`` must never wait on the database, so the router reads this book. The log
(``profiles.store.executions``) is the source: the book is rebuilt from it in log
order, and each router places every row it learns of, its own writes at once and other
processes' rows as it catches up, in the same order. So every router holding the same
rows holds the same book, whatever order the rows reached it in:

- totals and sums do not depend on order;
- each window holds the pair's newest entries in log order, a late row in its place;
- ``seq`` is an execution's place among its task type's executions in log order. A row
  that arrives after newer ones takes its place, and the seqs after it move up by one.
  The book remembers the last ``tail`` log keys of each task type for that; a row older
  than all of them marks the book ``stale`` (the router then rebuilds it from the log).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence

from trustroute.profiles.profile import ProfileState, WindowEntry
from trustroute.profiles.recency import WINDOW_SIZE
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store.executions import LogKey, LogRow

#: A placed record and its seq (its place among its task type's executions).
Committed = tuple[ExecutionRecord, int]
#: Decides a placed record's quality evidence (quality or None, pending); None: its own.
Judge = Callable[[ExecutionRecord, int, LogKey], tuple[float | None, bool] | None]


class ProfileBook:
    """Thread-safe map of (agent, task type) -> ProfileState plus per-task-type clocks."""

    def __init__(self, window_size: int = WINDOW_SIZE, tail: int = 10_000) -> None:
        self.window_size = window_size
        self.tail = tail
        self._states: dict[tuple[str, str], ProfileState] = {}
        self._clocks: dict[str, int] = {}
        self._tails: dict[str, list[LogKey]] = {}
        #: task type -> agent -> executions awaiting a verdict (pairs with none left out),
        #: and each task type's version there (a new number at every change, never reused)
        self._pending: dict[str, dict[str, int]] = {}
        self._pending_versions: dict[str, int] = {}
        self._pending_changes = 0
        self._lock = threading.RLock()
        self.stale = False  # a row arrived older than a task type's remembered tail

    # -- reading -----------------------------------------------------------------
    def get(self, agent_id: str, task_type: str) -> ProfileState | None:
        """The state of one pair, or None when it has never been executed."""
        return self._states.get((agent_id, task_type))

    def clock(self, task_type: str) -> int:
        """How many executions of ``task_type`` the book holds (all agents)."""
        return self._clocks.get(task_type, 0)

    def for_task_type(self, task_type: str) -> list[ProfileState]:
        """Every agent's profile for one task type."""
        with self._lock:
            return [s for (_, t), s in self._states.items() if t == task_type]

    def pending_versions(self) -> dict[str, int]:
        """The task types with executions awaiting a verdict, each with a number that
        changes whenever their counts there do (a reader keeps what it derived from
        ``pending_on`` while it stays the same)."""
        with self._lock:
            return dict(self._pending_versions)

    def pending_on(self, task_type: str) -> dict[str, int]:
        """The agents with executions of ``task_type`` awaiting a verdict, and how many."""
        with self._lock:
            return dict(self._pending.get(task_type, {}))

    def task_types(self) -> list[str]:
        """Task types with at least one execution, sorted."""
        with self._lock:
            return sorted({t for _, t in self._states})

    def __iter__(self) -> Iterator[ProfileState]:
        with self._lock:
            return iter(list(self._states.values()))

    def __len__(self) -> int:
        return len(self._states)

    # -- writing -----------------------------------------------------------------
    def place(self, rows: Sequence[LogRow], judge: Judge | None = None
              ) -> tuple[list[Committed], bool]:
        """Put log rows in their places; returns each record with its seq, and whether
        every row came after all the book already held (False: a strategy that folds
        incrementally should be rebuilt from the book). ``judge`` decides each record's
        quality evidence (feedback: docs/feedback.md)."""
        placed: list[Committed] = []
        in_order = True
        with self._lock:
            for record, key, *_ in rows:
                seq, last = self._take_seq(record.task_type, key)
                in_order = in_order and last
                self._fold(record, seq, key, None if judge is None else judge(record, seq, key))
                placed.append((record, seq))
        return placed, in_order

    def apply(self, record: ExecutionRecord, seq: int | None = None) -> ProfileState:
        """Fold one record as the newest of its task type (for tests that feed
        a book directly); ``seq`` defaults to the next of the task type's clock."""
        with self._lock:
            clock = self._clocks.get(record.task_type, 0)
            seq = clock + 1 if seq is None else seq
            self._clocks[record.task_type] = max(clock, seq)
            return self._fold(record, seq)

    def _fold(self, record: ExecutionRecord, seq: int, key: LogKey | None = None,
              evidence: tuple[float | None, bool] | None = None) -> ProfileState:
        """Fold ``record`` into its pair's state (created on the pair's first record)."""
        pair = (record.agent_id, record.task_type)
        state = self._states.get(pair)
        if state is None:
            state = self._states[pair] = ProfileState(*pair, self.window_size)
        state.apply(record, seq, key, evidence)
        self._note_pending(state)
        return state

    def amend(self, agent_id: str, task_type: str, seq: int, timestamp: float,
              key: LogKey | None, old: tuple[float | None, bool],
              new: tuple[float | None, bool]) -> tuple[WindowEntry, WindowEntry] | None:
        """A held execution's quality evidence changed (``ProfileState.amend``); None
        when the pair is not held or its window no longer holds the execution."""
        with self._lock:
            state = self._states.get((agent_id, task_type))
            if state is None:
                return None
            held = state.amend(seq, timestamp, key, old, new)
            self._note_pending(state)
            return held

    def _note_pending(self, state: ProfileState) -> None:
        task_type, agents = state.task_type, self._pending.get(state.task_type)
        if (agents or {}).get(state.agent_id, 0) == state.pending:
            return
        self._pending_changes += 1
        if state.pending:
            if agents is None:
                agents = self._pending[task_type] = {}
            agents[state.agent_id] = state.pending
            self._pending_versions[task_type] = self._pending_changes
        elif agents is not None:
            del agents[state.agent_id]
            if agents:
                self._pending_versions[task_type] = self._pending_changes
            else:
                del self._pending[task_type], self._pending_versions[task_type]

    def _take_seq(self, task_type: str, key: LogKey) -> tuple[int, bool]:
        """The seq of a new row of ``task_type`` at ``key`` (moving later seqs up), and
        whether it is the newest."""
        clock = self._clocks.get(task_type, 0) + 1
        self._clocks[task_type] = clock
        tail = self._tails.setdefault(task_type, [])
        if not tail or key > tail[-1]:
            tail.append(key)
            if len(tail) > 2 * self.tail:
                del tail[:-self.tail]
            return clock, True
        if key < tail[0] and clock - 1 > len(tail):
            self.stale = True  # its place is older than the keys remembered
        after = len(tail) - bisect.bisect(tail, key)
        tail.insert(len(tail) - after, key)
        for state in self.for_task_type(task_type):
            state.shift_after(key)
        return clock - after, False

    def export(self) -> tuple[list[ProfileState], dict[str, int], dict[str, list[LogKey]]]:
        """Every state, the task clocks and the remembered log keys (for a cached
        projection; the states are the book's own, read them under no other write)."""
        with self._lock:
            return (list(self._states.values()), dict(self._clocks),
                    {t: list(k) for t, k in self._tails.items()})

    def restore(self, states: list[ProfileState], clocks: dict[str, int],
                tails: dict[str, list[LogKey]]) -> None:
        """Take the place of everything held: a cached projection's content."""
        with self._lock:
            self._states = {(s.agent_id, s.task_type): s for s in states}
            self._clocks, self._tails, self.stale = dict(clocks), dict(tails), False
            self._pending, self._pending_versions = {}, {}
            for state in states:
                self._note_pending(state)

    def clear(self) -> None:
        """Forget everything (before a rebuild)."""
        self.restore([], {}, {})

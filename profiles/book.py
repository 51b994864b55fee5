"""ProfileBook: the in-memory view of every profile that routing decisions read.

``select()`` must never wait on the database, so the router reads this book. The store
is the durable source: the book is rebuilt from it on open (``rebuild``) and folds each
committed batch right after the store's transaction commits (``fold``), using the same
arithmetic. It is the router's first learner (``trustroute.router.learner``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from trustroute.profiles.profile import ProfileState
from trustroute.profiles.records import ExecutionRecord

if TYPE_CHECKING:
    from trustroute.profiles.store import Store


class ProfileBook:
    """Thread-safe map of (agent, task type) -> ProfileState plus per-task-type clocks."""

    def __init__(self, window_size: int = 100) -> None:
        self.window_size = window_size
        self._states: dict[tuple[str, str], ProfileState] = {}
        self._clocks: dict[str, int] = {}
        self._lock = threading.RLock()

    # -- reading -----------------------------------------------------------------
    def get(self, agent_id: str, task_type: str) -> ProfileState | None:
        """The state of one pair, or None when it has never been executed."""
        return self._states.get((agent_id, task_type))

    def clock(self, task_type: str) -> int:
        """How many executions of ``task_type`` have been recorded (all agents)."""
        return self._clocks.get(task_type, 0)

    def for_agent(self, agent_id: str) -> list[ProfileState]:
        """Every task-type profile of one agent (for pooling across task types)."""
        with self._lock:
            return [s for (a, _), s in self._states.items() if a == agent_id]

    def for_task_type(self, task_type: str) -> list[ProfileState]:
        """Every agent's profile for one task type."""
        with self._lock:
            return [s for (_, t), s in self._states.items() if t == task_type]

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
    def apply(self, record: ExecutionRecord, seq: int | None = None) -> ProfileState:
        """Fold a committed record in; ``seq`` is the task clock the store assigned."""
        with self._lock:
            key = (record.agent_id, record.task_type)
            state = self._states.get(key)
            if state is None:
                state = ProfileState(record.agent_id, record.task_type, self.window_size)
                self._states[key] = state
            clock = self._clocks.get(record.task_type, 0)
            seq = clock + 1 if seq is None else seq
            self._clocks[record.task_type] = max(clock, seq)
            state.apply(record, seq)
            return state

    def fold(self, batch: Sequence[tuple[ExecutionRecord, int]]) -> None:
        """Fold committed records, each with its seq, in commit order."""
        for record, seq in batch:
            self.apply(record, seq)

    def rebuild(self, store: Store) -> None:
        """Reload every profile and task clock from ``store``."""
        states, clocks = store.executions.load()
        self.replace(states, clocks)

    def replace(self, states: Iterable[ProfileState], clocks: dict[str, int]) -> None:
        """Swap in a freshly loaded view (used on open and on refresh)."""
        fresh = {(s.agent_id, s.task_type): s for s in states}
        with self._lock:
            self._states = fresh
            self._clocks = dict(clocks)

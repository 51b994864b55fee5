"""The agent a paused LangGraph task was routed to, so that its resume goes back to it.

An agent that calls LangGraph's ``interrupt()`` pauses its graph; resumed, the node runs
again from its start and so does the routed runnable in it. Nothing was recorded for the
paused attempt, so a new decision could pick another agent (at cold start, a coin toss),
and the person's answer would reach an agent that never asked. So each attempt that
passes an interrupt up is remembered here, keyed by the LangGraph task (the thread and
checkpoint namespace of the node run, as ``LangGraphInterruptHook`` keys its request
ids: the same when the node re-runs), and the re-run prefers that agent while it is
still eligible. The entry is forgotten once the task has an outcome.

The memory is this process's: a graph resumed in another process (or after a restart)
decides again, as before. At most ``size`` paused tasks are kept, the least recently
used forgotten first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

#: A LangGraph task, as ``graph_task_key`` names it.
TaskKey = tuple[Hashable, ...]


def graph_task_key(config: Mapping[str, Any], *scope: Hashable) -> TaskKey | None:
    """The LangGraph task a run belongs to (``thread_id`` and ``checkpoint_ns`` of its
    ``configurable``), within ``scope``; None outside a graph with a checkpointer."""
    configurable = config.get("configurable") or {}
    thread, namespace = configurable.get("thread_id"), configurable.get("checkpoint_ns")
    if thread is None or not namespace:
        return None
    return (*scope, str(thread), str(namespace))


class PausedTasks:
    """LangGraph task -> the agent whose ``interrupt()`` paused it (thread-safe, LRU)."""

    def __init__(self, size: int = 1024) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size
        self._agents: OrderedDict[TaskKey, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._agents)

    def remember(self, key: TaskKey | None, agent_id: str) -> None:
        """``agent_id`` paused the task ``key`` (nothing outside a graph)."""
        if key is None:
            return
        with self._lock:
            self._agents.pop(key, None)
            self._agents[key] = agent_id
            if len(self._agents) > self.size:
                self._agents.popitem(last=False)

    def recall(self, key: TaskKey | None) -> str | None:
        """The agent that paused the task ``key``, if this process remembers one."""
        if key is None:
            return None
        with self._lock:
            agent_id = self._agents.get(key)
            if agent_id is not None:
                self._agents.move_to_end(key)
            return agent_id

    def forget(self, key: TaskKey | None) -> None:
        """The task ``key`` has an outcome: its next run is a new decision."""
        if key is not None:
            with self._lock:
                self._agents.pop(key, None)


#: The paused tasks of every RoutedRunnable in this process (keys carry the router).
PAUSED = PausedTasks()

"""The attempt a paused LangGraph task was on, so that its resume goes back to it.

An agent that calls LangGraph's ``interrupt()`` pauses its graph; resumed, the node runs
again from its start and so does the routed runnable in it. Nothing was recorded for the
paused attempt, so a new decision could pick another agent (at cold start, a coin toss),
and the person's answer would reach an agent that never asked; and a fresh task would
have a new task id and no failures, so an agent that failed before the one that asked
would never be linked to its rescue. So each attempt that passes an interrupt up is
remembered here (``PausedAttempt``: its agent, task id, attempt number and the failures
before it), keyed by the routed call: the LangGraph task (the thread and checkpoint
namespace of the node run, the same when the node re-runs) and the call's index among
the node run's routed calls of that router and task type, as ``LangGraphInterruptHook``
keys its request ids (a re-run takes the same path up to the interrupt, so the n-th call
is the same call). The re-run resumes it as the same attempt of the same task,
preferring that agent while it is still eligible. The entry is forgotten once that call
has an outcome; the node's other routed calls neither take nor forget it.

The memory is this process's: a graph resumed in another process (or after a restart)
decides again, as before. At most ``size`` paused tasks are kept, the least recently
used forgotten first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from trustroute.integrations.langgraph import CallsPerNodeRun, current_node_run

#: A LangGraph task, as ``graph_task_key`` names it.
TaskKey = tuple[Hashable, ...]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PausedAttempt:
    """What a paused attempt needs to run again as itself: its agent, its task's id, its
    attempt number (1-based) and the agents that failed before it, with their errors in
    the order tried (so ``exception_key`` gives the agent the same input again)."""

    agent_id: str
    task_id: str
    attempt: int
    errors: Mapping[str, BaseException]


def graph_task_key(config: Mapping[str, Any], *scope: Hashable) -> TaskKey | None:
    """The LangGraph task a run belongs to (``thread_id`` and ``checkpoint_ns`` of its
    ``configurable``), within ``scope``; None outside a graph with a checkpointer."""
    configurable = config.get("configurable") or {}
    thread, namespace = configurable.get("thread_id"), configurable.get("checkpoint_ns")
    if thread is None or not namespace:
        return None
    return (*scope, str(thread), str(namespace))


_CALLS = CallsPerNodeRun()  # routed calls so far per node run, router and task type


def routed_call_key(config: Mapping[str, Any], *scope: Hashable) -> TaskKey | None:
    """The routed call a run is, within its LangGraph task: ``graph_task_key`` plus the
    index of the call among the node run's calls of the same ``scope`` (0, 1, ...; 0
    when the node run is unknown), so two routed calls in one node are told apart."""
    task = graph_task_key(config, *scope)
    if task is None:
        return None
    run = current_node_run()
    return (*task, 0 if run is None else _CALLS.next(run, *task))


class PausedTasks(Generic[T]):
    """LangGraph task -> what paused it (thread-safe, LRU)."""

    def __init__(self, size: int = 1024) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size
        self._paused: OrderedDict[TaskKey, T] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._paused)

    def remember(self, key: TaskKey | None, paused: T) -> None:
        """``paused`` paused the task ``key`` (nothing outside a graph)."""
        if key is None:
            return
        with self._lock:
            self._paused.pop(key, None)
            self._paused[key] = paused
            if len(self._paused) > self.size:
                self._paused.popitem(last=False)

    def recall(self, key: TaskKey | None) -> T | None:
        """What paused the task ``key``, if this process remembers it."""
        if key is None:
            return None
        with self._lock:
            paused = self._paused.get(key)
            if paused is not None:
                self._paused.move_to_end(key)
            return paused

    def forget(self, key: TaskKey | None) -> None:
        """The task ``key`` has an outcome: its next run is a new decision."""
        if key is not None:
            with self._lock:
                self._paused.pop(key, None)


#: The paused attempts of every RoutedRunnable in this process (keys carry the router).
PAUSED: PausedTasks[PausedAttempt] = PausedTasks()

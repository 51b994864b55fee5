"""LangGraph adapter: a transfer hook that pauses the running graph for a person
(docs/handoff.md describes it for users).

Inside a LangGraph node, ``LangGraphInterruptHook`` calls ``langgraph.types.interrupt``
with the request's payload; a person resumes the thread with ``Command(resume=answer)``
and the node re-runs, so the hook returns ``answer``. The interrupt is control flow, not
failure (``passthrough``: never retried or stored as pending), and the hook runs last.
Because a resumed node runs again from its start, hooks before it fire again: so that
receivers can de-duplicate, ``prepare_request`` derives the request's id from the
graph's thread, checkpoint and task and the hand-off's place in the node run (a
``request_id`` the caller set is kept).

Needs the ``langgraph`` extra (LangGraph 1.1 or later): ``pip install 'trustroute[langgraph]'``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from trustroute.router.handoff.transfer.request import TransferRequest

# request ids of hand-offs in graphs: uuid5 in this namespace of (thread, checkpoint, task, n)
REQUEST_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:trustroute:langgraph-handoff")
OUTSIDE_A_GRAPH = (
    "LangGraphInterruptHook must run inside a LangGraph node of a graph compiled with a "
    "checkpointer (it pauses the graph with interrupt()); call the HandoffRunnable or the "
    "dispatcher from the node, or use another hook (CallableHook, WebhookHook) outside a graph"
)


def current_node_run() -> Any:
    """LangGraph's ``ExecutionInfo`` of the node running now; None outside a graph (or
    without langgraph). Equal for one run of a node and different for its next run (a
    resume, a retry): it carries when the run started."""
    try:
        from langgraph.runtime import get_runtime
    except ImportError:  # pragma: no cover - langgraph is in the dev extra
        return None
    try:
        runtime = get_runtime()
    except (RuntimeError, KeyError):  # not inside a runnable, or not inside a graph
        return None
    return getattr(runtime, "execution_info", None)


class CallsPerNodeRun:
    """The index of each call within its node run (0, 1, ...), per ``scope``. A node
    re-run on resume takes the same path up to its ``interrupt()`` (LangGraph's rule),
    so the n-th call of the re-run is the n-th call of the run that paused. The counts
    of the last ``kept`` node runs are remembered, the oldest forgotten first."""

    def __init__(self, kept: int = 1024) -> None:
        self.kept = kept
        self._counts: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()

    def next(self, run: Any, *scope: Hashable) -> int:
        """The index of this call within the node run ``run`` (``current_node_run``)."""
        key = (run, *scope)
        with self._lock:
            index = self._counts.pop(key, 0)
            self._counts[key] = index + 1
            if len(self._counts) > self.kept:
                self._counts.popitem(last=False)
            return index


# hand-offs prepared so far per node run; shared: two hooks in one node must not reuse an index
_handoffs = CallsPerNodeRun()


class LangGraphInterruptHook:
    """Pause the current LangGraph run with ``interrupt(payload)``; return the resume value."""

    runs_last = True
    dispatch_attempts = 1
    returns_human_response = True

    def __init__(
        self,
        *,
        name: str = "langgraph",
        payload: Callable[[TransferRequest], Any] | None = None,
    ) -> None:
        try:
            from langgraph.errors import GraphBubbleUp
            from langgraph.types import interrupt
        except ImportError as exc:  # pragma: no cover - langgraph is in the dev extra
            raise ImportError(
                "LangGraphInterruptHook needs langgraph 1.1 or later: "
                "pip install 'trustroute[langgraph]'"
            ) from exc
        self._interrupt = interrupt
        self.passthrough: tuple[type[BaseException], ...] = (GraphBubbleUp,)
        self.name = name
        self._payload = payload or (lambda request: {"handoff": request.payload()})

    def __repr__(self) -> str:
        return f"LangGraphInterruptHook({self.name!r})"

    def prepare_request(self, request: TransferRequest) -> TransferRequest:
        """The request with a ``request_id`` that is the same each time the node runs.

        Derived from the thread, checkpoint and task (its namespace names the node) and
        the hand-off's index within this node run. Outside a graph, or when the caller
        chose the id, the request is returned unchanged.
        """
        run = current_node_run()
        if run is None or "request_id" in request.model_fields_set:
            return request
        key = [run.thread_id, run.checkpoint_id, run.checkpoint_ns, _handoffs.next(run)]
        request_id = uuid.uuid5(REQUEST_ID_NAMESPACE, json.dumps(key))
        return request.model_copy(update={"request_id": str(request_id)})

    def __call__(self, request: TransferRequest) -> Any:
        """Interrupt the graph (first run) or return the person's answer (on resume)."""
        if current_node_run() is None:
            raise RuntimeError(OUTSIDE_A_GRAPH)
        return self._interrupt(self._payload(request))

    async def acall(self, request: TransferRequest) -> Any:
        """Same as the sync call: ``interrupt`` reads the run's context on this task."""
        return self(request)

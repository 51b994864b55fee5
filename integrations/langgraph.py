"""LangGraph adapter: a transfer hook that pauses the running graph for a person.

Inside a LangGraph node, ``LangGraphInterruptHook`` calls ``langgraph.types.interrupt``
with the request's JSON payload. The graph stops (its state saved by the checkpointer),
the caller sees the payload under ``__interrupt__``, and a person resumes the thread with
``Command(resume=answer)``; the node then re-runs and the hook returns ``answer``, which
becomes ``HandoffResult.human_response``.

The interrupt is control flow, not failure: the hook declares LangGraph's
``GraphBubbleUp`` as passthrough so the dispatcher re-raises it without retrying or
storing the request as pending, and it runs after the other hooks. Because a resumed node
runs again from its start, hooks before it fire again on resume: make notification
receivers idempotent on the request payload (or keep the interrupt hook alone).

Needs the ``langgraph`` extra: ``pip install 'trustroute[langgraph]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trustroute.router.handoff.transfer.request import TransferRequest


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
                "LangGraphInterruptHook needs langgraph: pip install 'trustroute[langgraph]'"
            ) from exc
        self._interrupt = interrupt
        self.passthrough: tuple[type[BaseException], ...] = (GraphBubbleUp,)
        self.name = name
        self._payload = payload or (lambda request: {"handoff": request.payload()})

    def __repr__(self) -> str:
        return f"LangGraphInterruptHook({self.name!r})"

    def __call__(self, request: TransferRequest) -> Any:
        """Interrupt the graph (first run) or return the person's answer (on resume)."""
        try:
            return self._interrupt(self._payload(request))
        except RuntimeError as exc:
            if "outside of a runnable context" in str(exc):
                raise RuntimeError(
                    "LangGraphInterruptHook must run inside a LangGraph node of a graph "
                    "compiled with a checkpointer"
                ) from exc
            raise

    async def acall(self, request: TransferRequest) -> Any:
        """Same as the sync call: ``interrupt`` reads the run's context on this task."""
        return self(request)

"""``TraceCollector``: a LangChain callback handler that turns one agent run into a
``ReasoningTrace`` for trace quality scoring.

What becomes a step:

- ``thought``: the text a model produced (``on_llm_end``);
- ``tool_call``: each tool call a model asked for (name and arguments), and each tool or
  retriever started without such a request (``on_tool_start`` / ``on_retriever_start``);
  a started tool that matches a requested call (by ``tool_call_id``, else by name) is
  the same step, not a second one;
- ``observation``: a tool's output or the documents a retriever returned;
- ``error``: a model, tool or retriever error, a tool output marked ``status="error"``
  (how LangGraph's ToolNode reports a handled tool failure), or a chain error not
  already reported by the run that raised it (one exception is one step, however many
  enclosing runs it passes through).

Whether an error was recovered from is decided at scoring time from what followed.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_core.outputs import LLMResult

from trustroute.router.trace import DEFAULT_DOMAIN, ReasoningTrace, TraceOutcome, TraceStep

MAX_STEP_CHARS = 2000  # a step's content is evidence, not an archive


def _text(value: Any) -> str:
    if isinstance(value, ToolMessage):
        value = value.content
    if not isinstance(value, str):
        value = str(value)
    return value[:MAX_STEP_CHARS]


class TraceCollector(BaseCallbackHandler):
    """Collects the steps of one run (attach it to the run's callbacks), thread-safe."""

    run_inline = True  # steps must stay in the order the events happened

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._steps: list[TraceStep] = []
        self._requested_ids: set[str] = set()
        self._requested_names: Counter[str] = Counter()
        self._tool_names: dict[UUID, str] = {}
        self._errors: list[BaseException] = []  # kept alive so identity checks are sound

    @property
    def steps(self) -> list[TraceStep]:
        """The steps collected so far (a copy)."""
        with self._lock:
            return list(self._steps)

    def _add(self, type_: str, content: Any = "", tool: str | None = None,
             input_: Any = None) -> None:
        step = TraceStep(type=type_, content=_text(content), tool=tool or None,  # type: ignore[arg-type]
                         input=input_)
        with self._lock:
            self._steps.append(step)

    def _error(self, error: BaseException, tool: str | None = None) -> None:
        with self._lock:
            if any(error is seen for seen in self._errors):
                return
            self._errors.append(error)
        self._add("error", f"{type(error).__name__}: {error}", tool)

    # -- models ----------------------------------------------------------------------
    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        """A model's text is a thought; each tool call it requests is a tool_call."""
        for generations in response.generations:
            for generation in generations:
                if generation.text.strip():
                    self._add("thought", generation.text)
                message = getattr(generation, "message", None)
                for call in getattr(message, "tool_calls", None) or ():
                    name = call.get("name") or "tool"
                    with self._lock:
                        if call.get("id"):
                            self._requested_ids.add(call["id"])
                        else:
                            self._requested_names[name] += 1
                    self._add("tool_call", f"{name}({call.get('args')})", name,
                              call.get("args"))

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        """A failed model call."""
        self._error(error)

    # -- tools -----------------------------------------------------------------------
    def on_tool_start(self, serialized: dict[str, Any], input_str: str, *, run_id: UUID,
                      inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A tool started: a new tool_call step unless a model requested this call."""
        name = (serialized or {}).get("name") or kwargs.get("name") or "tool"
        call_id = kwargs.get("tool_call_id")
        with self._lock:
            self._tool_names[run_id] = name
            if call_id and call_id in self._requested_ids:
                self._requested_ids.discard(call_id)
                return
            if self._requested_names[name] > 0:
                self._requested_names[name] -= 1
                return
        self._add("tool_call", f"{name}({input_str})", name,
                  inputs if inputs is not None else input_str)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool's output is an observation (an error when marked so)."""
        with self._lock:
            name = self._tool_names.pop(run_id, None) or kwargs.get("name")
        if isinstance(output, ToolMessage) and output.status == "error":
            self._add("error", output, name)
        else:
            self._add("observation", output, name)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool raised."""
        with self._lock:
            name = self._tool_names.pop(run_id, None)
        self._error(error, name)

    # -- retrievers ------------------------------------------------------------------
    def on_retriever_start(self, serialized: dict[str, Any], query: str, *, run_id: UUID,
                           **kwargs: Any) -> None:
        """A retrieval is a tool call of the retriever."""
        name = (serialized or {}).get("name") or kwargs.get("name") or "retriever"
        with self._lock:
            self._tool_names[run_id] = name
        self._add("tool_call", f"{name}({query})", name, query)

    def on_retriever_end(self, documents: Sequence[Document], *, run_id: UUID,
                         **kwargs: Any) -> None:
        """Retrieved documents are an observation."""
        with self._lock:
            name = self._tool_names.pop(run_id, None)
        self._add("observation", "\n".join(d.page_content for d in documents), name)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID,
                           **kwargs: Any) -> None:
        """A retriever raised."""
        with self._lock:
            name = self._tool_names.pop(run_id, None)
        self._error(error, name)

    # -- chains ----------------------------------------------------------------------
    def on_chain_error(self, error: BaseException, **kwargs: Any) -> None:
        """A chain error not already reported by the run that raised it."""
        self._error(error)

    # -- result ----------------------------------------------------------------------
    def trace(self, *, success: bool, confidence: float = 1.0, objective: str = "",
              task_domain: str = DEFAULT_DOMAIN, result_summary: str = "") -> ReasoningTrace:
        """The collected run as a ReasoningTrace with the given outcome."""
        return ReasoningTrace(
            objective=objective, steps=tuple(self.steps),
            outcome=TraceOutcome(success=success, confidence=confidence,
                                 result_summary=result_summary[:MAX_STEP_CHARS]),
            metadata={"task_domain": task_domain},  # type: ignore[arg-type]
        )

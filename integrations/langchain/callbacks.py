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
from trustroute.router.trace.model import StepType, TraceMetadata

MAX_STEP_CHARS = 2000  # a step's content is evidence, not an archive


def _text(value: Any) -> str:
    return str(value.content if isinstance(value, ToolMessage) else value)[:MAX_STEP_CHARS]


class TraceCollector(BaseCallbackHandler):
    """Collects the steps of one run (attach it to the run's callbacks), thread-safe."""

    run_inline = True  # steps must stay in the order the events happened

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._steps: list[TraceStep] = []
        self._requested: Counter[str] = Counter()  # tool calls a model asked for: id or name
        self._tool_names: dict[UUID, str] = {}
        self._errors: list[BaseException] = []  # kept alive so identity checks are sound

    @property
    def steps(self) -> list[TraceStep]:
        """The steps collected so far (a copy)."""
        with self._lock:
            return list(self._steps)

    def _add(self, type_: StepType, content: Any = "", tool: str | None = None,
             input_: Any = None) -> None:
        step = TraceStep(type=type_, content=_text(content), tool=tool or None, input=input_)
        with self._lock:
            self._steps.append(step)

    def _started(self, run_id: UUID, serialized: dict[str, Any] | None,
                 kwargs: dict[str, Any], default: str) -> str:
        """Remember the name of a tool or retriever run until it ends."""
        name = (serialized or {}).get("name") or kwargs.get("name") or default
        with self._lock:
            self._tool_names[run_id] = name
        return name

    def _ended(self, run_id: UUID) -> str | None:
        with self._lock:
            return self._tool_names.pop(run_id, None)

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
                        self._requested[call.get("id") or name] += 1
                    self._add("tool_call", f"{name}({call.get('args')})", name,
                              call.get("args"))

    # -- tools -----------------------------------------------------------------------
    def on_tool_start(self, serialized: dict[str, Any], input_str: str, *, run_id: UUID,
                      inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """A tool started: a new tool_call step unless a model requested this call."""
        name = self._started(run_id, serialized, kwargs, "tool")
        with self._lock:
            for key in (kwargs.get("tool_call_id"), name):
                if key and self._requested[key] > 0:
                    self._requested[key] -= 1
                    return
        self._add("tool_call", f"{name}({input_str})", name,
                  inputs if inputs is not None else input_str)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool's output is an observation (an error when marked so)."""
        name = self._ended(run_id) or kwargs.get("name")
        error = isinstance(output, ToolMessage) and output.status == "error"
        self._add("error" if error else "observation", output, name)

    # -- retrievers ------------------------------------------------------------------
    def on_retriever_start(self, serialized: dict[str, Any], query: str, *, run_id: UUID,
                           **kwargs: Any) -> None:
        """A retrieval is a tool call of the retriever."""
        name = self._started(run_id, serialized, kwargs, "retriever")
        self._add("tool_call", f"{name}({query})", name, query)

    def on_retriever_end(self, documents: Sequence[Document], *, run_id: UUID,
                         **kwargs: Any) -> None:
        """Retrieved documents are an observation."""
        self._add("observation", "\n".join(d.page_content for d in documents),
                  self._ended(run_id))

    # -- errors ----------------------------------------------------------------------
    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A model, tool, retriever or chain error, one step per exception however many
        enclosing runs report it; a tool's or retriever's error step names it."""
        name = self._ended(run_id)
        with self._lock:
            if any(error is seen for seen in self._errors):
                return
            self._errors.append(error)
        self._add("error", f"{type(error).__name__}: {error}", name)

    on_llm_error = on_tool_error = on_retriever_error = on_chain_error

    # -- result ----------------------------------------------------------------------
    def trace(self, *, success: bool, confidence: float = 1.0, objective: str = "",
              task_domain: str = DEFAULT_DOMAIN, result_summary: str = "") -> ReasoningTrace:
        """The collected run as a ReasoningTrace with the given outcome."""
        return ReasoningTrace(
            objective=objective, steps=tuple(self.steps),
            outcome=TraceOutcome(success=success, confidence=confidence,
                                 result_summary=result_summary[:MAX_STEP_CHARS]),
            metadata=TraceMetadata(task_domain=task_domain),
        )

"""Outcome capture for a routed run: success and quality, token cost, latency.

Token usage is collected two ways and de-duplicated by message id: a callback handler
sees every chat-model call inside the agent (so a chain that ends in a string parser,
or a multi-step tool agent, is still costed), and the agent's output is scanned for AI
messages that no callback reported (a runnable that builds an ``AIMessage`` itself).
AI messages already present in the *input* (conversation history) are never counted.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import LLMResult

from trustroute.integrations.langchain.callbacks import MAX_STEP_CHARS, TraceCollector
from trustroute.integrations.langchain.task import RoutedTask
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.agents import AgentSpec
from trustroute.router.decision import RoutingDecision
from trustroute.router.router import AgentRouter
from trustroute.router.trace import (
    Embedder,
    NoveltyCache,
    ReasoningTrace,
    TraceWeights,
    aevaluate_value,
    evaluate_value,
)

_SCAN_DEPTH = 4
Evaluator = Callable[[Any, Any], Any]


def ai_messages(value: Any, depth: int = _SCAN_DEPTH) -> Iterator[AIMessage]:
    """AI messages inside ``value`` (itself, lists, tuples, dict values, ``.messages``)."""
    if isinstance(value, AIMessage):
        yield value
    elif depth <= 0 or isinstance(value, str | bytes):
        return
    elif isinstance(value, list | tuple):
        for item in value:
            yield from ai_messages(item, depth - 1)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from ai_messages(item, depth - 1)
    elif isinstance(getattr(value, "messages", None), list):
        yield from ai_messages(value.messages, depth - 1)


def _key(message: AIMessage) -> str:
    return message.id or f"object:{id(message)}"


def _tokens(message: AIMessage) -> tuple[int, int] | None:
    usage = message.usage_metadata
    if not usage:
        return None
    return int(usage.get("input_tokens", 0) or 0), int(usage.get("output_tokens", 0) or 0)


class UsageCollector(BaseCallbackHandler):
    """Token usage of every chat-model call inside one agent run, keyed by message id."""

    run_inline = True  # cheap and order-independent: no need for an executor hop

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._usage: dict[str, tuple[int, int]] = {}

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        """Remember the usage of each AI message the model produced."""
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                if isinstance(message, AIMessage) and (tokens := _tokens(message)):
                    with self._lock:
                        self._usage[_key(message)] = tokens

    def tokens(self, input_: Any, output: Any) -> tuple[int, int] | None:
        """(input, output) tokens of this run, or None when no usage was reported."""
        with self._lock:
            usage = dict(self._usage)
        history = {_key(m) for m in ai_messages(input_)}
        for message in ai_messages(output):
            key = _key(message)
            if key not in usage and key not in history and (tokens := _tokens(message)):
                usage[key] = tokens
        if not usage:
            return None
        return sum(t[0] for t in usage.values()), sum(t[1] for t in usage.values())


def run_cost(spec: AgentSpec, tokens: tuple[int, int] | None) -> float | None:
    """Token cost at the agent's prices plus its ``cost_per_call``.

    None when the agent has no token prices or no usage was reported; the router then
    records ``cost_per_call`` alone (or no cost).
    """
    p_in, p_out = spec.price_per_1k_input_tokens, spec.price_per_1k_output_tokens
    if tokens is None or (p_in is None and p_out is None):
        return None
    token_cost = tokens[0] / 1000.0 * (p_in or 0.0) + tokens[1] / 1000.0 * (p_out or 0.0)
    return token_cost + (spec.cost_per_call or 0.0)


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the evaluator (or the absence of an exception) says about an output."""

    success: bool
    quality: float | None  # None: the record's default (1.0 on success, 0.0 on failure)
    confidence: float  # the trace outcome's confidence


def _verdict(value: Any, threshold: float) -> Judgement:
    if isinstance(value, bool):
        return Judgement(value, None, 1.0)
    if isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0:
        score = float(value)
        return Judgement(score >= threshold, score, score)
    raise ValueError(f"evaluator must return a bool or a number in [0, 1], got {value!r}")


def judge(evaluator: Evaluator | None, input_: Any, output: Any,
          threshold: float) -> Judgement:
    """Success is "returned without raising" unless an evaluator says otherwise.

    A float verdict is the quality; it counts as success at ``threshold`` or above.
    """
    if evaluator is None:
        return Judgement(True, None, 1.0)
    value = evaluator(input_, output)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError("the evaluator is async; call the RoutedRunnable with ainvoke/astream")
    return _verdict(value, threshold)


async def ajudge(evaluator: Evaluator | None, input_: Any, output: Any,
                 threshold: float) -> Judgement:
    """Async ``judge``: the evaluator may be sync or async."""
    if evaluator is None:
        return Judgement(True, None, 1.0)
    value = evaluator(input_, output)
    if inspect.isawaitable(value):
        value = await value
    return _verdict(value, threshold)


def objective_text(input_: Any) -> str:
    """The task objective of a trace: the input as text (prompt values and messages read
    as their text, other values as ``str``)."""
    if isinstance(input_, str):
        text = input_
    elif hasattr(input_, "to_string"):
        text = input_.to_string()
    elif isinstance(input_, list | tuple):
        text = "\n".join(getattr(m, "text", None) or str(m) for m in input_)
    else:
        text = str(input_)
    return text[:MAX_STEP_CHARS]


def is_priced(spec: AgentSpec) -> bool:
    """True when the agent has token prices (only then is usage worth collecting)."""
    return spec.price_per_1k_input_tokens is not None or \
        spec.price_per_1k_output_tokens is not None


@dataclass(frozen=True, slots=True)
class RunCapture:
    """The handlers attached to one agent attempt: token usage (for priced agents) and
    the trace (with ``quality="trace"``). No handler at all keeps a plain call cheap."""

    usage: UsageCollector | None
    trace: TraceCollector | None

    @classmethod
    def start(cls, *, with_usage: bool, with_trace: bool) -> RunCapture:
        """Fresh collectors for one attempt."""
        return cls(UsageCollector() if with_usage else None,
                   TraceCollector() if with_trace else None)

    @property
    def handlers(self) -> list[BaseCallbackHandler]:
        """The handlers to add to the attempt's callbacks."""
        return [h for h in (self.usage, self.trace) if h is not None]

    def tokens(self, input_: Any, output: Any) -> tuple[int, int] | None:
        """Tokens used by the attempt, when usage was collected and reported."""
        return None if self.usage is None else self.usage.tokens(input_, output)


@dataclass(frozen=True, slots=True)
class TraceScoring:
    """How ``quality="trace"`` scores a run: embedder, novelty cache, weights."""

    embedder: Embedder | None
    cache: NoveltyCache
    weights: TraceWeights | None


@dataclass(frozen=True, slots=True)
class OutcomeRecorder:
    """Turns one finished attempt into one ``router.record()`` (sync or async)."""

    router: AgentRouter
    evaluator: Evaluator | None
    threshold: float
    scoring: TraceScoring | None

    def _trace(self, task: RoutedTask, capture: RunCapture, input_: Any, output: Any,
               verdict: Judgement) -> ReasoningTrace | None:
        if capture.trace is None or self.scoring is None or not verdict.success:
            return None  # a failed run records quality 0, whatever its trace looked like
        return capture.trace.trace(success=True, confidence=verdict.confidence,
                                   objective=objective_text(input_),
                                   task_domain=task.task_type,
                                   result_summary=objective_text(output))

    def _fields(self, task: RoutedTask, decision: RoutingDecision, capture: RunCapture,
                input_: Any, output: Any, latency_ms: float) -> dict[str, Any]:
        tokens = capture.tokens(input_, output)
        return {"latency_ms": latency_ms, "metadata": task.record_metadata(),
                "cost": run_cost(self.router.agent(decision.agent_id), tokens)}

    def success(self, task: RoutedTask, decision: RoutingDecision, capture: RunCapture,
                input_: Any, output: Any, latency_ms: float) -> ExecutionRecord:
        """Record an attempt that returned ``output``."""
        verdict = judge(self.evaluator, input_, output, self.threshold)
        quality = verdict.quality
        trace = self._trace(task, capture, input_, output, verdict)
        if trace is not None and self.scoring is not None:
            quality = evaluate_value(trace, embedder=self.scoring.embedder,
                                     cache=self.scoring.cache, weights=self.scoring.weights)
        return self.router.record(decision, success=verdict.success, quality=quality,
                                  **self._fields(task, decision, capture, input_, output,
                                                 latency_ms))

    async def asuccess(self, task: RoutedTask, decision: RoutingDecision,
                       capture: RunCapture, input_: Any, output: Any,
                       latency_ms: float) -> ExecutionRecord:
        """Async ``success``: the database write runs off the event loop."""
        verdict = await ajudge(self.evaluator, input_, output, self.threshold)
        quality = verdict.quality
        trace = self._trace(task, capture, input_, output, verdict)
        if trace is not None and self.scoring is not None:
            quality = await aevaluate_value(trace, embedder=self.scoring.embedder,
                                            cache=self.scoring.cache,
                                            weights=self.scoring.weights)
        return await self.router.arecord(decision, success=verdict.success, quality=quality,
                                         **self._fields(task, decision, capture, input_,
                                                        output, latency_ms))

    def failure(self, task: RoutedTask, decision: RoutingDecision, capture: RunCapture,
                input_: Any, latency_ms: float, error: BaseException) -> None:
        """Record an attempt whose agent raised ``error`` (tokens spent still cost)."""
        try:
            self.router.record(decision, success=False,
                               **self._fields(task, decision, capture, input_, None,
                                              latency_ms))
        finally:
            task.failed(decision, error)

    async def afailure(self, task: RoutedTask, decision: RoutingDecision,
                       capture: RunCapture, input_: Any, latency_ms: float,
                       error: BaseException) -> None:
        """Async ``failure``."""
        try:
            await self.router.arecord(decision, success=False,
                                      **self._fields(task, decision, capture, input_, None,
                                                     latency_ms))
        finally:
            task.failed(decision, error)

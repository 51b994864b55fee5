"""Outcome capture for a routed attempt: success and quality, token cost, latency.

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
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    BaseCallbackHandler,
    CallbackManagerForChainRun,
)
from langchain_core.messages import AIMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import Runnable, RunnableConfig, patch_config

try:  # LangGraph's interrupt() and parent commands are control flow (an optional extra)
    from langgraph.errors import GraphBubbleUp, GraphInterrupt, ParentCommand
    CONTROL_FLOW: tuple[type[BaseException], ...] = (GraphBubbleUp,)
    TO_PARENT: tuple[type[BaseException], ...] = (ParentCommand,)  # the agent's last step
    PAUSES: tuple[type[BaseException], ...] = (GraphInterrupt,)  # resumed later
except ImportError:  # pragma: no cover (without langgraph nothing raises them)
    CONTROL_FLOW = TO_PARENT = PAUSES = ()

from trustroute.integrations.langchain.background import Job
from trustroute.integrations.langchain.call_style import cannot_run
from trustroute.integrations.langchain.callbacks import MAX_STEP_CHARS, TraceCollector
from trustroute.integrations.langchain.task import RoutedTask
from trustroute.integrations.langgraph import current_node_run
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.agents import AgentSpec
from trustroute.router.decision import RoutingDecision
from trustroute.router.trace import ReasoningTrace, aevaluate_value, evaluate_value
from trustroute.router.trace.value import SINGLE_THOUGHT_SCORE

if TYPE_CHECKING:
    from trustroute.integrations.langchain.runnable import RoutedRunnable

_SCAN_DEPTH = 4
RunManager = CallbackManagerForChainRun | AsyncCallbackManagerForChainRun


class TraceQualityWarning(UserWarning):
    """``quality="trace"`` is recording a score that cannot tell runs apart."""


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


class RunOutput(BaseCallbackHandler):
    """The output one run reports as it ends (``on_chain_end``). For a stream, that is
    what the agent produced as a whole: a LangGraph graph's final state (what its
    ``invoke`` returns, whatever ``stream_mode`` the caller streams), an LCEL chain's
    chunks added up."""

    run_inline = True

    def __init__(self, run_id: uuid.UUID) -> None:
        super().__init__()
        self.run_id = run_id
        self.reported = False
        self.output: Any = None

    def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        """Keep the output of the run ``run_id`` (nested runs end too: not theirs)."""
        if run_id == self.run_id:
            self.output, self.reported = outputs, True


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


def _verdict(value: Any, threshold: float) -> tuple[bool, float | None]:
    """(success, quality) from an evaluator's verdict: a bool is the success; a number in
    [0, 1] (any real number type, numpy's included) is the quality, a success at
    ``threshold`` or above. Quality None leaves the
    record's default (1.0 on success, 0.0 on failure)."""
    if isinstance(value, bool | np.bool_):  # numpy's too: judges often compute with it
        return bool(value), None
    if isinstance(value, Real) and math.isfinite(score := float(value)) and 0 <= score <= 1:
        return score >= threshold, score
    raise ValueError(f"evaluator must return a bool or a number in [0, 1], got {value!r}")


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


@dataclass(slots=True)
class Attempt:
    """One agent's try at a task: its decision, the config of its child run, the
    collectors on that run and the time spent inside the agent; records its outcome and,
    on success, credits the agent in the routed run's metadata (``parent``)."""

    routed: RoutedRunnable
    task: RoutedTask
    decision: RoutingDecision
    spec: AgentSpec
    config: RunnableConfig
    parent: RunManager
    usage: UsageCollector | None  # only for an agent with token prices
    trace: TraceCollector | None  # only with quality="trace"
    ended: RunOutput | None  # only for a stream: the output the agent's run reports
    run_ids: tuple[str, ...]  # the routed run's, this attempt's child run's, and callers'
    seconds: float = 0.0

    @classmethod
    def start(cls, routed: RoutedRunnable, task: RoutedTask, decision: RoutingDecision,
              config: RunnableConfig, parent: RunManager, *, stream: bool = False
              ) -> Attempt:
        """The attempt of ``decision``: a child run of ``parent`` named after the agent;
        no collector at all keeps a plain call cheap."""
        callbacks = parent.get_child()
        spec = routed.router.agent(decision.agent_id)
        priced = spec.price_per_1k_input_tokens is not None or \
            spec.price_per_1k_output_tokens is not None
        run_id = uuid.uuid4()  # the agent's run gets this id: tracers show it
        usage = UsageCollector() if priced else None
        trace = TraceCollector() if routed.quality == "trace" else None
        ended = RunOutput(run_id) if stream else None
        for handler in (usage, trace, ended):
            if handler is not None:
                callbacks.add_handler(handler, inherit=True)
        # ``config`` already carries the task's metadata (run_config); add the attempt's agent
        child = patch_config(config, callbacks=callbacks, run_name=decision.agent_id)
        child["metadata"] = {**child["metadata"], **task.credit(decision)}
        child["run_id"] = run_id
        # refs for router.feedback: also the run that invoked the routed one (the chain of
        # ``routed | parser``) and the LangGraph run it is in, when its caller named it
        callers = (parent.parent_run_id, getattr(current_node_run(), "run_id", None))
        run_ids = dict.fromkeys(str(r) for r in (parent.run_id, run_id, *callers) if r)
        return cls(routed, task, decision, spec, child, parent, usage, trace, ended,
                   tuple(run_ids))

    @property
    def agent(self) -> Runnable[Any, Any]:
        """The runnable of the chosen agent."""
        return self.routed.agents[self.decision.agent_id]

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Count the time spent in the block as time inside the agent."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - start

    def succeeded(self, output: Any) -> None:
        """Record an attempt that returned ``output`` (a stream's chunks added up: see
        ``_whole``)."""
        routed, output = self.routed, self._whole(output)
        verdict = self._evaluate(output)
        if inspect.isawaitable(verdict):
            if inspect.iscoroutine(verdict):
                verdict.close()
            raise TypeError("the evaluator is async; call the RoutedRunnable with ainvoke/astream")
        success, quality = _verdict(verdict, routed.success_threshold)
        if (trace := self._trace(output, success, quality)) is not None:
            quality = evaluate_value(trace, embedder=routed.embedder,
                                     cache=routed.novelty_cache, weights=routed.trace_weights)
        rec = routed.router.record(self.decision, success=success, quality=quality,
                                   **self._fields(output))
        self._judge_later(rec, output)
        self._credit()
        self.task.settled()

    async def asucceeded(self, output: Any) -> None:
        """Async ``succeeded``: the database write runs off the event loop."""
        routed, output = self.routed, self._whole(output)
        verdict = self._evaluate(output)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        success, quality = _verdict(verdict, routed.success_threshold)
        if (trace := self._trace(output, success, quality)) is not None:
            quality = await aevaluate_value(trace, embedder=routed.embedder,
                                            cache=routed.novelty_cache,
                                            weights=routed.trace_weights)
        rec = await routed.router.arecord(self.decision, success=success, quality=quality,
                                          **self._fields(output))
        self._judge_later(rec, output)
        self._credit()
        self.task.settled()

    def failed(self, error: BaseException, *, streamed: bool = False) -> None:
        """Record an attempt whose agent raised ``error`` (tokens spent still cost), and
        log it; ``streamed``: chunks already reached the caller. An agent with no sync
        implementation is not judged (``call_style.py``): logged, not recorded."""
        unjudged = cannot_run(error, sync=True)
        if not unjudged:
            self.routed.router.record(self.decision, success=False, **self._fields(None))
        self._failed(error, streamed, "a sync call" if unjudged else None)

    async def afailed(self, error: BaseException, *, streamed: bool = False) -> None:
        """Async ``failed`` (not judged: an agent with no async implementation)."""
        unjudged = cannot_run(error, sync=False)
        if not unjudged:
            await self.routed.router.arecord(self.decision, success=False,
                                             **self._fields(None))
        self._failed(error, streamed, "an async call" if unjudged else None)

    def passed_up(self, error: BaseException) -> NoReturn:
        """Raise on ``error``, LangGraph's control flow (``CONTROL_FLOW``), whatever
        ``exceptions_to_handle`` says: the agent working, not failing, as LangGraph's own
        retries and fallbacks treat it, so no other agent is tried. A ``Command`` for the
        parent graph ends the agent's work: recorded as ``succeeded`` with the command as
        its output. ``interrupt()`` pauses it: like a cancelled run, no outcome yet."""
        if isinstance(error, TO_PARENT):
            self.succeeded(error.args[0])
            raise error
        self._paused(error)
        raise error

    async def apassed_up(self, error: BaseException) -> NoReturn:
        """Async ``passed_up``."""
        if isinstance(error, TO_PARENT):
            await self.asucceeded(error.args[0])
            raise error
        self._paused(error)
        raise error

    def _paused(self, error: BaseException) -> None:
        if isinstance(error, PAUSES):
            self.task.paused(self.decision)
        self.not_handled(error, "LangGraph control flow: raised to the graph, not recorded")

    def _failed(self, error: BaseException, streamed: bool, missing: str | None) -> None:
        """Log the failure; ``missing``: the call style the agent has no implementation
        for (not recorded), else None (recorded)."""
        self.task.failed(self.decision, error)
        self.task.settled()
        then = ("its chunks already reached the caller, so it is raised" if streamed
                else "falling back to another agent" if self.task.can_fall_back()
                else "no further attempt")
        why = "recorded" if missing is None else \
            f"not recorded: the agent has no implementation for {missing}"
        self.routed.failures.failed(self.decision.agent_id, self.task.task_type, error,
                                    recorded=missing is None, warn=True,
                                    then=f"{why}; {then}")

    def not_handled(self, error: BaseException, then: str = "not in exceptions_to_handle: "
                    "raised to the caller, not recorded") -> None:
        """The agent raised ``error``, outside ``exceptions_to_handle``: logged at DEBUG
        only (it reaches the caller at once, unrecorded)."""
        self.routed.failures.failed(
            self.decision.agent_id, self.task.task_type, error, recorded=False, then=then)

    def _credit(self) -> None:
        """The routed run's metadata names this agent as the one whose output it returns:
        tracers read it when the run ends (its start precedes the choice of agent).
        Updated in place: LangChain has no other way to add metadata at a run's end (the
        start event shares the dict; docs/langchain.md, "Run metadata")."""
        self.parent.metadata.update(self.task.credit(self.decision))

    def _whole(self, output: Any) -> Any:
        """What the agent produced: for a stream, the output its run reported as it
        ended (a graph's final state, not its last update), else ``output``."""
        return self.ended.output if self.ended is not None and self.ended.reported else output

    def _evaluate(self, output: Any) -> Any:
        """The evaluator's verdict (maybe awaitable); without one, or when it judges in
        the background, success is "returned without raising"."""
        evaluator = self.routed.evaluator
        if evaluator is None or self.routed.evaluate == "background":
            return True
        return evaluator(self.task.input, output)

    def _judge_later(self, rec: ExecutionRecord, output: Any) -> None:
        """Queue ``output`` for the background evaluator (``evaluate="background"``)."""
        routed = self.routed
        if (background := routed.background) is not None and routed.evaluator is not None:
            background.submit(Job(rec.record_id, self.task.input, output, routed.evaluator,
                                  routed.router))

    def _fields(self, output: Any) -> dict[str, Any]:
        tokens = None if self.usage is None else self.usage.tokens(self.task.input, output)
        metadata = {"task_id": self.task.task_id, "attempt": self.task.attempt}  # see task.py
        return {"latency_ms": self.seconds * 1000.0, "metadata": metadata,
                "cost": run_cost(self.spec, tokens), "run_ids": self.run_ids}

    def _trace(self, output: Any, success: bool, quality: float | None
               ) -> ReasoningTrace | None:
        if self.trace is None or not success:
            return None  # a failed run records quality 0, whatever its trace looked like
        trace = self.trace.trace(success=True, confidence=1.0 if quality is None else quality,
                                 objective=objective_text(self.task.input),
                                 task_domain=self.task.task_type,
                                 result_summary=objective_text(output))
        single_thought = len(trace.steps) == 1 and trace.steps[0].type == "thought"
        if single_thought and self.routed._first_single_thought():
            warnings.warn(TraceQualityWarning(
                f"RoutedRunnable(quality='trace'): agent {self.decision.agent_id!r}'s run was "
                "a single thought (one model answer, no tool call, retrieval or error), and a "
                f"single thought scores {SINGLE_THOUGHT_SCORE} by design, so every such run "
                f"records quality {SINGLE_THOUGHT_SCORE} whatever its answer. Trace scoring "
                "is for agents that use tools or retrieval; for a plain model or chain pass "
                "evaluator= (a bool or a number in [0, 1] per output) instead of "
                "quality='trace'. (Warned once per RoutedRunnable.)"), stacklevel=2)
        return trace

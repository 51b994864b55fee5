"""``RoutedRunnable``: a LangChain Runnable that routes each input to the best agent and
records how it went; docs/langchain.md describes the behaviour in full.

Each invocation is one task and one run: reading the task type, choosing the agent (which
takes an in-flight slot), running it as a child run named after its id and recording
the outcome all happen inside that run, so an error at any step is the run's error, seen
by tracers. A failed agent hands the task to the next-best one (a stream only before its
first chunk: after that the caller already holds that agent's output). The slot is
released on every path (a cancelled async call: at once, although sync code LangChain
runs in a thread for it runs on; docs/langchain.md, "In-flight slots"); a cancelled or
abandoned run records nothing, since whether the agent would have succeeded is unknown.
Async paths never wait on the database on the event loop (choosing is in memory, or in
a worker thread when it takes a lease shared through a server store; ``router.arecord``
writes from a worker thread).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from contextlib import aclosing
from functools import partial
from typing import Any, Literal, cast

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from trustroute.integrations.langchain.background import BackgroundEvaluations
from trustroute.integrations.langchain.checks import as_runnable, one_line
from trustroute.integrations.langchain.errors import AgentsMismatch
from trustroute.integrations.langchain.failures import FailureLog
from trustroute.integrations.langchain.recording import CONTROL_FLOW, Attempt
from trustroute.integrations.langchain.task import (
    RoutedTask,
    check_task_type,
    resolve_task_type,
    with_task_type_key,
)
from trustroute.router.router import AgentRouter
from trustroute.router.trace import NoveltyCache, TraceWeights

_END = object()  # what ``next(chunks, _END)`` returns once a stream is exhausted
#: Never an agent's failure, whatever ``exceptions_to_handle`` says: the caller stopping.
NEVER_JUDGED = (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit)


def is_async(evaluator: Any) -> bool:
    """Whether calling ``evaluator`` returns a coroutine (a function or an object)."""
    return inspect.iscoroutinefunction(evaluator) or inspect.iscoroutinefunction(
        getattr(evaluator, "__call__", None))  # noqa: B004 (an object's async __call__)


def _combine(total: Any, chunk: Any) -> Any:
    """Chunks add up to the full output when they support ``+`` (messages, strings)."""
    try:
        return total + chunk
    except TypeError:
        return chunk


async def _aiter_one(value: Any) -> AsyncIterator[Any]:
    yield value


class RoutedRunnable(RunnableSerializable[Any, Any]):
    """Route each input to one of ``agents`` with ``router``; learn from every run.

    ``task_type`` is the key of the input mapping that holds the task type (a missing
    key is a ``TaskTypeError``), a callable of the input, or ``fixed_task_type("code")``
    for the same task type on every input.
    ``evaluator(input, output) -> bool | float`` judges outputs (a float is the
    quality, a success at ``success_threshold`` or above), or with
    ``evaluate="background"`` after the reply, as feedback (``background.py``). Every
    execution stores the run ids of the routed run and of the agent's child run, so
    ``router.feedback(run_id, ...)`` finds it. ``quality="trace"`` records
    the run's trace score as quality instead. ``max_attempts`` (default: every agent)
    bounds fallbacks; ``capacity_timeout`` is how long to wait for a free agent.
    ``exceptions_to_handle`` and ``exception_key`` mean what they mean for LangChain's
    ``with_fallbacks``; each agent failure is logged (``failure_log_interval_s``).
    """

    router: AgentRouter
    agents: dict[str, Runnable[Any, Any]]
    task_type: str | Callable[[Any], str]
    evaluator: Callable[[Any, Any], Any] | None = None
    evaluate: Literal["inline", "background"] = "inline"
    evaluate_queue_size: int = Field(default=1000, ge=1)
    evaluate_workers: int = Field(default=4, ge=1)
    quality: Literal["trace"] | None = None
    max_attempts: int | None = Field(default=None, ge=1)
    success_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    exceptions_to_handle: tuple[type[BaseException], ...] = (Exception,)
    exception_key: str | None = None
    failure_log_interval_s: float = Field(default=60.0, ge=0.0)
    embedder: Any = None
    novelty_cache: NoveltyCache = Field(default_factory=NoveltyCache)
    trace_weights: TraceWeights | None = None
    capacity_timeout: float | None = Field(default=30.0, ge=0.0)
    #: The queue of outputs awaiting a background evaluator, made on construction (its
    #: threads start on the first output). LangChain hands it to the copies it builds
    #: for configurable fields, so whatever their evaluator, router or ``evaluate``,
    #: they share this queue and its workers (and ``flush``/``close``) with you.
    background_queue: BackgroundEvaluations | None = Field(default=None, exclude=True,
                                                           repr=False)
    #: Where agent failures are logged, made on construction and handed to the copies
    #: the same way, so one rate limit (``failure_log_interval_s``) covers them all.
    failure_log: FailureLog | None = Field(default=None, exclude=True, repr=False)

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")
    _single_thought_seen: bool = PrivateAttr(default=False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise one_line(exc, type(self)) from None
        known, given = set(self.router.agents), set(self.agents)
        if known != given:
            raise AgentsMismatch(missing=known - given, unknown=given - known)
        if self.failure_log is None:  # else a copy's: its original's log
            self.failure_log = FailureLog(self.failure_log_interval_s)
        if self.evaluate == "background" and self.evaluator is None:
            raise ValueError("evaluate='background' runs the evaluator after the reply; "
                             "pass evaluator= too")
        if self.background_queue is None:  # else a copy's: its original's queue
            self.background_queue = BackgroundEvaluations(
                max_queue=self.evaluate_queue_size, workers=self.evaluate_workers,
                log_interval_s=self.failure_log_interval_s)

    @property
    def failures(self) -> FailureLog:
        """Where this runnable logs its agents' failures (see ``failures.py``)."""
        assert self.failure_log is not None  # made on construction
        return self.failure_log

    @property
    def background(self) -> BackgroundEvaluations | None:
        """The queue this runnable's outputs await the evaluator on (``evaluate=
        "background"``; else None)."""
        return self.background_queue if self.evaluate == "background" else None

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) until the background evaluator has judged
        every queued output, also those of the copies made for configurable fields;
        True when none is left. Replies never wait for this."""
        return True if self.background_queue is None else self.background_queue.flush(timeout)

    def close(self, timeout: float | None = 10.0) -> int:
        """Stop background evaluation (also the copies' made for configurable fields),
        giving queued outputs ``timeout`` seconds; returns how many were not judged
        (they stay pending, see docs/feedback.md). Close it before the router."""
        return 0 if self.background_queue is None else self.background_queue.close(timeout)

    @field_validator("agents", mode="before")
    @classmethod
    def _coerce_agents(cls, value: Any) -> Any:
        if not isinstance(value, Mapping) or not value:
            raise TypeError("agents must be a non-empty dict of agent id -> Runnable, "
                            f"got {value!r}")
        return {agent_id: as_runnable(agent, f"agents[{agent_id!r}]")
                for agent_id, agent in value.items()}

    @field_validator("task_type", mode="before")
    @classmethod
    def _check_task_type(cls, value: Any) -> Any:
        return check_task_type(value)

    @field_validator("embedder")
    @classmethod
    def _check_embedder(cls, value: Any) -> Any:
        if value is not None and not callable(getattr(value, "embed_query", None)):
            raise TypeError(f"embedder must be a LangChain Embeddings, got {value!r}")
        return value

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """Configurable fields of every agent (so ``configurable`` reaches them)."""
        return get_unique_config_specs(
            spec for agent in self.agents.values() for spec in agent.config_specs)

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        """The agents' input schema (they all take the same input), as LangChain's
        ``with_fallbacks`` takes its primary's, plus the task-type key (a required string)
        when ``task_type`` names one: ``as_tool`` and graphs see every field it needs."""
        schema = cast(type[BaseModel],
                      next(iter(self.agents.values())).get_input_schema(config))
        if not isinstance(self.task_type, str):
            return schema
        return with_task_type_key(schema, self.task_type, self.get_name("Input"))

    def get_output_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        """The agents' output schema (the first agent's)."""
        return cast(type[BaseModel], next(iter(self.agents.values())).get_output_schema(config))

    def _task(self, input_: Any, sync: bool = False) -> RoutedTask:
        """The task of ``input_``. A task type that cannot be read is kept as the task's
        ``problem``: the run raises it once started, so tracers record the error; so is
        an async evaluator on a sync call, before any agent works for nothing."""
        try:
            if sync and self.evaluate == "inline" and is_async(self.evaluator):
                raise TypeError("the evaluator is async, so judge inline with ainvoke or "
                                "astream, or pass evaluate='background' or a sync evaluator")
            task_type, problem = resolve_task_type(self.task_type, input_), None
            if self.exception_key is not None and not isinstance(input_, dict):
                raise ValueError(f"exception_key={self.exception_key!r} passes an agent's "
                                 "error to the next one inside the input, so the input must "
                                 f"be a dict, got {type(input_).__name__}")
        except Exception as exc:
            task_type, problem = "", exc
        return RoutedTask(self.router, input_, task_type, problem=problem,
                          max_attempts=self.max_attempts or len(self.agents),
                          timeout=self.capacity_timeout)

    def _first_single_thought(self) -> bool:
        """True the first time a run of this runnable scores as a single thought."""
        first, self._single_thought_seen = not self._single_thought_seen, True
        return first

    # -- invoke ----------------------------------------------------------------------
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the input on the chosen agent (falling back on errors); record the outcome."""
        with self._task(input, sync=True) as task:
            return self._call_with_config(partial(self._invoke_task, task=task), input,
                                          task.run_config(config), **kwargs)

    def _invoke_task(self, input_: Any, run_manager: CallbackManagerForChainRun,
                     config: RunnableConfig, *, task: RoutedTask, **kwargs: Any) -> Any:
        while True:
            attempt = Attempt.start(self, task, task.next(), config, run_manager)
            try:
                with attempt.timed():
                    output = attempt.agent.invoke(
                        task.attempt_input(input_, self.exception_key), attempt.config,
                        **kwargs)
            except NEVER_JUDGED:
                raise
            except CONTROL_FLOW as exc:
                attempt.passed_up(exc)
            except self.exceptions_to_handle as exc:
                attempt.failed(exc)
                continue
            except Exception as exc:
                attempt.not_handled(exc)
                raise
            attempt.succeeded(output)
            return output

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> Any:
        """Async ``invoke``."""
        with self._task(input) as task:
            return await self._acall_with_config(partial(self._ainvoke_task, task=task),
                                                 input, task.run_config(config), **kwargs)

    async def _ainvoke_task(self, input_: Any, run_manager: AsyncCallbackManagerForChainRun,
                            config: RunnableConfig, *, task: RoutedTask,
                            **kwargs: Any) -> Any:
        while True:
            attempt = Attempt.start(self, task, await task.anext(), config, run_manager)
            try:
                with attempt.timed():
                    output = await attempt.agent.ainvoke(
                        task.attempt_input(input_, self.exception_key), attempt.config,
                        **kwargs)
            except NEVER_JUDGED:
                raise
            except CONTROL_FLOW as exc:
                await attempt.apassed_up(exc)
            except self.exceptions_to_handle as exc:
                await attempt.afailed(exc)
                continue
            except Exception as exc:
                attempt.not_handled(exc)
                raise
            await attempt.asucceeded(output)
            return output

    # -- stream ----------------------------------------------------------------------
    def stream(self, input: Any, config: RunnableConfig | None = None,
               **kwargs: Any) -> Iterator[Any]:
        """Stream the chosen agent's chunks; falls back only before the first chunk."""
        with self._task(input, sync=True) as task:
            yield from self._transform_stream_with_config(
                iter([input]), partial(self._stream_task, task=task), task.run_config(config),
                **kwargs)

    def _stream_task(self, inputs: Iterator[Any], run_manager: CallbackManagerForChainRun,
                     config: RunnableConfig, *, task: RoutedTask,
                     **kwargs: Any) -> Iterator[Any]:
        input_ = next(inputs)
        while True:
            attempt = Attempt.start(self, task, task.next(), config, run_manager, stream=True)
            chunks: Iterator[Any] | None = None  # made at the first chunk: an error making
            output: Any = _END                    # it is the agent's, as an invoke's is
            try:
                while True:
                    try:
                        with attempt.timed():
                            if chunks is None:
                                chunks = attempt.agent.stream(
                                    task.attempt_input(input_, self.exception_key),
                                    attempt.config, **kwargs)
                            chunk = next(chunks, _END)
                    except NEVER_JUDGED:
                        raise
                    except CONTROL_FLOW as exc:
                        attempt.passed_up(exc)
                    except self.exceptions_to_handle as exc:
                        attempt.failed(exc, streamed=output is not _END)
                        if output is _END:
                            break  # nothing reached the caller yet: the next agent takes it
                        raise
                    except Exception as exc:
                        attempt.not_handled(exc)
                        raise
                    if chunk is _END:
                        attempt.succeeded(None if output is _END else output)
                        return
                    output = chunk if output is _END else _combine(output, chunk)
                    yield chunk
            finally:
                if callable(close := getattr(chunks, "close", None)):
                    close()

    async def astream(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> AsyncIterator[Any]:
        """Async ``stream``; closing or cancelling it releases the agent's slot."""
        with self._task(input) as task:
            stream = cast(AsyncGenerator[Any, None], self._atransform_stream_with_config(
                _aiter_one(input), partial(self._astream_task, task=task),
                task.run_config(config), **kwargs))
            async with aclosing(stream):
                async for chunk in stream:
                    yield chunk

    async def _astream_task(self, inputs: AsyncIterator[Any],
                            run_manager: AsyncCallbackManagerForChainRun,
                            config: RunnableConfig, *, task: RoutedTask,
                            **kwargs: Any) -> AsyncIterator[Any]:
        input_ = await anext(inputs)
        while True:
            attempt = Attempt.start(self, task, await task.anext(), config, run_manager,
                                    stream=True)
            chunks: AsyncIterator[Any] | None = None  # made at the first chunk (as stream)
            output: Any = _END
            try:
                while True:
                    try:
                        with attempt.timed():
                            if chunks is None:
                                chunks = attempt.agent.astream(
                                    task.attempt_input(input_, self.exception_key),
                                    attempt.config, **kwargs)
                            chunk = await anext(chunks, _END)
                    except NEVER_JUDGED:
                        raise
                    except CONTROL_FLOW as exc:
                        await attempt.apassed_up(exc)
                    except self.exceptions_to_handle as exc:
                        await attempt.afailed(exc, streamed=output is not _END)
                        if output is _END:
                            break  # nothing reached the caller yet: the next agent takes it
                        raise
                    except Exception as exc:
                        attempt.not_handled(exc)
                        raise
                    if chunk is _END:
                        await attempt.asucceeded(None if output is _END else output)
                        return
                    output = chunk if output is _END else _combine(output, chunk)
                    yield chunk
            finally:
                if callable(aclose := getattr(chunks, "aclose", None)):
                    await aclose()

"""One user task routed by ``RoutedRunnable``: its input, task type, id, attempts and leases.

Every ``record()`` made for one task carries ``{"task_id", "attempt"}`` metadata (one
uuid per invocation, or the paused task's when it resumes; 1-based attempt): the trust
layer counts a contradiction when an agent failed and a later attempt on the same task
succeeded. Selection waits for a
released slot (``router.slots.wait_for_release``) when every eligible agent is at
capacity, so a large ``abatch`` queues instead of failing; any other "no agent" answer
is final.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from trustroute.integrations.langchain.errors import AllAgentsFailed, TaskTypeError
from trustroute.integrations.langchain.resume import (
    PAUSED,
    PausedAttempt,
    TaskKey,
    routed_call_key,
)
from trustroute.profiles.records import check_identifier
from trustroute.router.agents import AgentSpec
from trustroute.router.decision import RoutingDecision
from trustroute.router.errors import (
    AgentAtCapacity,
    CapacityTimeout,
    NoAgentAvailable,
    RouterError,
)
from trustroute.router.router import AgentRouter
from trustroute.router.trust.abstention import Abstained

TaskTypeSpec = str | Callable[[Any], str]


@dataclass(frozen=True, slots=True)
class FixedTaskType:
    """A task type that does not depend on the input; see ``fixed_task_type``."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a fixed task type must be a non-empty string, got {self.name!r}")

    def __call__(self, input_: Any) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"fixed_task_type({self.name!r})"


def fixed_task_type(name: str) -> FixedTaskType:
    """The task type ``name`` for every input: ``task_type=fixed_task_type("code")``.

    A bare string is always a key of the input mapping, so a fixed task type is said
    explicitly (``lambda _: "code"`` does the same, with a less readable repr)."""
    return FixedTaskType(name)


def check_task_type(value: Any) -> TaskTypeSpec:
    """``value`` if it can name a task type: an input key, or a callable of the input."""
    if (isinstance(value, str) and value) or callable(value):
        return value
    raise TypeError("task_type must be a non-empty string (the input key holding the "
                    "task type), a callable of the input, or fixed_task_type(name), "
                    f"got {value!r}")


@lru_cache(maxsize=128)
def with_task_type_key(schema: type[BaseModel], key: str, name: str) -> type[BaseModel]:
    """``schema`` with ``key`` added as a required string field (a schema of the whole
    input, a ``RootModel``, has no fields to keep: then a dict schema of ``key`` alone)."""
    about = "the task type, by which the input is routed to an agent"
    fields = text_field(key, about, "routed_task_type")
    if issubclass(schema, RootModel):
        return create_model(name, __config__=ConfigDict(extra="allow"), **fields)
    return cast(type[BaseModel], create_model(name, __base__=schema, **fields))


def text_field(key: str, about: str, python_name: str) -> dict[str, Any]:
    """The field definition (for ``create_model``) of a required string under ``key``;
    a key that cannot be a field's name is the alias of ``python_name``."""
    if key.startswith("_") or key in BaseModel.__dict__:  # not a field name: an alias
        return {python_name: (str, Field(alias=key, description=about))}
    return {key: (str, Field(description=about))}


def _describe(input_: Any, key: str) -> str:
    """Why ``input_`` has no value under ``key``, for the error message."""
    if isinstance(input_, Mapping):
        keys = ", ".join(repr(k) for k in list(input_)[:10])
        return f"the input has no key {key!r} (its keys: {keys or 'none'})"
    kind = type(input_).__name__
    hint = (" (a prompt before this runnable turned the dict into a prompt value: route "
            "first and put the prompt inside each agent, e.g. agents={'fast': prompt | "
            "model})" if hasattr(input_, "to_messages") else "")
    return f"the input is a {kind}, not a dict{hint}"


def resolve_task_type(spec: TaskTypeSpec, input_: Any) -> str:
    """The task type of ``input_``: ``spec(input_)`` for a callable (``fixed_task_type``
    included); for a string, the value under that key of the input mapping.

    Raises ``TaskTypeError`` when the key is missing, the input is not a mapping, or the
    value is not a non-empty string: a task type is never guessed from the spec itself.
    """
    if callable(spec):
        value = spec(input_)
        origin = "the task_type callable"
    elif isinstance(input_, Mapping) and spec in input_:
        value = input_[spec]
        origin = f"input key {spec!r}"
    else:
        # a prompt value means the prompt came first; otherwise the string may have been
        # meant as the task type itself, which fixed_task_type says
        literal = ("" if hasattr(input_, "to_messages") else
                   f"; if {spec!r} is the task type of every input, not a key, pass "
                   f"task_type=fixed_task_type({spec!r})")
        raise TaskTypeError(f"task_type={spec!r} names the input key holding the task type, "
                            f"but {_describe(input_, spec)}{literal}")
    if not isinstance(value, str) or not value:
        raise TaskTypeError(f"{origin} gave {value!r}; a task type must be a non-empty string")
    try:
        return check_identifier(value, f"the task type from {origin}")
    except ValueError as exc:  # too long, a control character: it cannot be stored
        raise TaskTypeError(str(exc)) from None


@dataclass
class RoutedTask:
    """One invocation: chooses the agent of each attempt (waiting up to ``timeout``
    seconds for capacity), remembers the agents that failed, and holds the live
    decision's lease until ``release`` (on leaving a ``with`` block).

    ``problem`` is an error met before the run started (the task type could not be
    worked out); ``next`` raises it, so it happens inside the run and tracers see it.
    """

    router: AgentRouter
    input: Any
    task_type: str
    max_attempts: int
    timeout: float | None
    task_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    attempt: int = 0
    errors: dict[str, BaseException] = field(default_factory=dict)
    current: RoutingDecision | None = None
    problem: Exception | None = None
    graph_task: TaskKey | None = None  # the routed call in its LangGraph task (resume.py)
    resuming: str | None = None  # the agent whose interrupt() paused this task (resume.py)

    def __enter__(self) -> RoutedTask:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def failed(self, decision: RoutingDecision, error: BaseException) -> None:
        """The current attempt's agent raised ``error``."""
        self.errors[decision.agent_id] = error
        self.release()

    def can_fall_back(self) -> bool:
        """True while another attempt may still find an agent that has not failed."""
        return self.attempt < self.max_attempts and bool(self._untried())

    def attempt_input(self, input_: Any, exception_key: str | None) -> Any:
        """The input of the next attempt: after a failure, with ``exception_key`` set to
        the last agent's exception (as LangChain's ``with_fallbacks`` passes it), in a
        copy: the caller's dict is left as it was."""
        if exception_key is None or not self.errors:
            return input_
        return {**input_, exception_key: next(reversed(self.errors.values()))}

    def release(self) -> None:
        """Give back the current attempt's in-flight slot (idempotent)."""
        if self.current is not None:
            self.current.release()
            self.current = None

    def paused(self, decision: RoutingDecision) -> None:
        """The agent of ``decision`` paused the LangGraph task with ``interrupt()``: its
        re-run on resume is this attempt of this task again, preferring that agent
        (``resume.py``)."""
        PAUSED.remember(self.graph_task, PausedAttempt(decision.agent_id, self.task_id,
                                                       self.attempt, dict(self.errors)))

    def settled(self) -> None:
        """An attempt was recorded: a later run of the LangGraph task decides anew."""
        PAUSED.forget(self.graph_task)

    def run_config(self, config: RunnableConfig | None) -> RunnableConfig:
        """``config`` plus run metadata (nested runs inherit it): the task's type and id.
        Notes the LangGraph task the run belongs to, if any (``graph_task``): resuming
        a paused attempt of it, the task takes that attempt's id, number and failures."""
        config = ensure_config(config)
        self.graph_task = routed_call_key(config, id(self.router), self.task_type)
        if (paused := PAUSED.recall(self.graph_task)) is not None and self.attempt == 0:
            self.task_id, self.attempt = paused.task_id, paused.attempt - 1
            self.errors, self.resuming = dict(paused.errors), paused.agent_id
        config["metadata"] = {**config.get("metadata", {}), "task_id": self.task_id}
        if self.problem is None:
            config["metadata"]["task_type"] = self.task_type
        return config

    def credit(self, decision: RoutingDecision) -> dict[str, Any]:
        """Run metadata naming the agent of ``decision`` as the current attempt's (and
        whether the router abstained on that decision)."""
        return {"agent_id": decision.agent_id, "decision_id": decision.decision_id,
                "score": decision.score, "attempt": self.attempt,
                "abstained": decision.abstained}

    # -- choosing the agent of the next attempt ----------------------------------------
    def next(self) -> RoutingDecision:
        """The next attempt's decision (lease held); raises when there is none."""
        for seen, wait in self._tries():
            self.router.slots.wait_for_release(seen, wait)
        assert self.current is not None  # the last try took it
        return self.current

    async def anext(self) -> RoutingDecision:
        """Async ``next``: waits for capacity on the event loop, never blocking it. With
        shared limits each try takes a lease in the store, so it runs in a worker thread."""
        tries = self._tries()
        while (step := await self._try(tries)) is not None:
            await self.router.slots.await_for_release(*step)
        assert self.current is not None  # the last try took it
        return self.current

    async def _try(self, tries: Iterator[tuple[int, float | None]]
                   ) -> tuple[int, float | None] | None:
        """One step of ``tries`` (None once a decision is taken). In a worker thread when
        it makes a store round trip; cancelled meanwhile, what it takes is given back."""
        if self.router.slots.shared is None:
            return next(tries, None)
        step = asyncio.get_running_loop().run_in_executor(None, next, tries, None)
        try:
            return await asyncio.shield(step)
        except asyncio.CancelledError:
            step.add_done_callback(lambda _: self.release())
            raise

    def _tries(self) -> Iterator[tuple[int, float | None]]:
        """Take the next attempt's decision as ``current``. Between tries it yields (the
        releases seen, seconds) for the caller to wait for a released slot, its one
        blocking step. Raises the task's ``problem``, or once ``max_attempts`` are spent
        or the router abstains on a fallback (the first failure, ``_all_failed``)."""
        if self.problem is not None:
            raise self.problem
        if self.attempt >= self.max_attempts:
            raise self._all_failed(
                f"max_attempts={self.max_attempts} reached" if self._untried() else "")
        if (resumed := self._resumed()) is not None:
            self.current, self.attempt = resumed, self.attempt + 1
            return
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            seen = self.router.slots.releases
            try:
                self.current = self.router.select(self.task_type, exclude=tuple(self.errors),
                                                  acquire=True)
            except (NoAgentAvailable, AgentAtCapacity) as exc:
                yield seen, self._wait_or_raise(exc, deadline, seen)
            except Abstained as exc:  # on_abstain: raise
                if not self.errors:
                    raise  # the first decision: no agent ran, the router's answer stands
                abstained = exc
                break
            else:
                self.attempt += 1
                return
        # a fallback decision abstained: the agents tried failed and no other is tried
        raise self._all_failed(f"then {abstained}")

    def _resumed(self) -> RoutingDecision | None:
        """The resumed attempt of a paused LangGraph task: the agent whose ``interrupt()``
        paused it, when it is still eligible and free (else None: a normal decision)."""
        agent_id, self.resuming = self.resuming, None
        if agent_id is None or agent_id not in self.router.agents:
            return None
        others = [other for other in self.router.agents if other != agent_id]
        try:
            return self.router.select(self.task_type, exclude=others, acquire=True)
        except RouterError:  # disabled, full, or abstaining alone: decide among all
            return None

    def _wait_or_raise(self, error: NoAgentAvailable | AgentAtCapacity,
                       deadline: float | None, seen: int) -> float | None:
        """Seconds to wait for a released slot (None: no limit) while some untried agent
        is merely full, or was until a slot came free since the try (``seen``: the
        releases counted before it; the wait then ends at once); otherwise raises
        ``CapacityTimeout`` when untried agents are full, else ``error``, or the first
        failure (``_all_failed``)."""
        left = None if deadline is None else deadline - time.monotonic()
        freed = self.router.slots.releases != seen
        if (isinstance(error, AgentAtCapacity) or freed or self._at_capacity()) and \
                (left is None or left > 0):
            return left
        if not self.errors:
            full = [spec.id for spec in self._untried() if self.router.slots.full(spec)]
            if full or isinstance(error, AgentAtCapacity):  # waited out capacity_timeout
                raise CapacityTimeout(self.task_type, full or [getattr(error, "agent_id", "")],
                                      self.timeout or 0.0) from None
            raise error
        raise self._all_failed(f"the others stayed at capacity for {self.timeout} s"
                               if self._at_capacity() else "")

    def _untried(self) -> list[AgentSpec]:
        return [spec for spec in self.router.agents.values()
                if spec.enabled and spec.accepts(self.task_type) and spec.id not in self.errors]

    def _at_capacity(self) -> bool:
        """True when some eligible, not-yet-failed agent is merely full (or at its rpm)."""
        return any(self.router.slots.full(spec) for spec in self._untried())

    def _all_failed(self, detail: str) -> BaseException:
        """The first agent's own exception, with every failure attached (see
        ``AllAgentsFailed``), as LangChain's fallbacks raise the first error."""
        return AllAgentsFailed(self.task_type, self.errors, detail).attach()

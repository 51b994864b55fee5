"""One user task routed by ``RoutedRunnable``: its task type, id, attempts and leases.

Every ``record()`` made for one task carries ``{"task_id", "attempt"}`` metadata (one
uuid per invocation, 1-based attempt): the trust layer counts a contradiction when an
agent failed and a later attempt on the same task succeeded. Selection waits for a
released slot (the router's ``wait_for_release``) when every eligible agent is at
capacity, so a large ``abatch`` queues instead of failing; any other "no agent" answer
is final.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from trustroute.integrations.langchain.errors import AllAgentsFailed, TaskTypeError
from trustroute.router.agents import AgentSpec
from trustroute.router.decision import RoutingDecision
from trustroute.router.errors import AgentAtCapacity, NoAgentAvailable
from trustroute.router.router import AgentRouter

TaskTypeSpec = str | Callable[[Any], str]


def resolve_task_type(spec: TaskTypeSpec, input_: Any) -> str:
    """The task type of ``input_``: ``spec(input_)`` for a callable; for a string, the
    input's value under that key when the input is a dict holding it, else the string."""
    if callable(spec):
        value = spec(input_)
        origin = "the task_type callable"
    elif isinstance(input_, Mapping) and spec in input_:
        value = input_[spec]
        origin = f"input key {spec!r}"
    else:
        return spec
    if not isinstance(value, str) or not value:
        raise TaskTypeError(f"{origin} gave {value!r}; a task type must be a non-empty string")
    return value


@dataclass
class RoutedTask:
    """State of one invocation: attempts made, agents that failed, the live decision."""

    task_type: str
    max_attempts: int
    task_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    attempt: int = 0
    errors: dict[str, BaseException] = field(default_factory=dict)
    current: RoutingDecision | None = None

    def begin(self, decision: RoutingDecision) -> RoutingDecision:
        """Make ``decision`` the current attempt."""
        self.attempt += 1
        self.current = decision
        return decision

    def failed(self, decision: RoutingDecision, error: BaseException) -> None:
        """The current attempt's agent raised ``error``."""
        self.errors[decision.agent_id] = error
        self.release()

    def release(self) -> None:
        """Give back the current attempt's in-flight slot (idempotent)."""
        if self.current is not None:
            self.current.release()
            self.current = None

    def record_metadata(self) -> dict[str, Any]:
        """The metadata every record() of this task carries (the shared convention)."""
        return {"task_id": self.task_id, "attempt": self.attempt}

    def run_metadata(self, decision: RoutingDecision) -> dict[str, Any]:
        """LangChain run metadata describing ``decision``."""
        return {"task_type": self.task_type, "task_id": self.task_id,
                "agent_id": decision.agent_id, "decision_id": decision.decision_id,
                "score": decision.score, "attempt": self.attempt}

    def all_failed(self, detail: str = "") -> AllAgentsFailed:
        """The error raised when no attempt succeeded."""
        error = AllAgentsFailed(self.task_type, self.errors, detail)
        if self.errors:
            error.__cause__ = list(self.errors.values())[-1]
        return error


class Selector:
    """Chooses the agent of each attempt, waiting for capacity up to ``timeout`` seconds."""

    def __init__(self, router: AgentRouter, timeout: float | None) -> None:
        self.router = router
        self.timeout = timeout

    def _untried(self, task: RoutedTask) -> list[AgentSpec]:
        return [spec for spec in self.router.agents.values()
                if spec.enabled and spec.accepts(task.task_type) and spec.id not in task.errors]

    def _at_capacity(self, task: RoutedTask) -> bool:
        """True when some eligible, not-yet-failed agent is merely full."""
        return any(self.router.in_flight(spec.id) >= spec.max_concurrent
                   for spec in self._untried(task))

    def _check_attempts(self, task: RoutedTask) -> None:
        if task.attempt >= task.max_attempts:
            detail = f"max_attempts={task.max_attempts} reached" if self._untried(task) else ""
            raise task.all_failed(detail)

    def _give_up(self, task: RoutedTask, error: NoAgentAvailable | AgentAtCapacity,
                 deadline: float | None) -> bool:
        waiting = isinstance(error, AgentAtCapacity) or self._at_capacity(task)
        return not waiting or (deadline is not None and time.monotonic() >= deadline)

    def _deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    def _no_more(self, task: RoutedTask, error: Exception) -> NoReturn:
        if not task.errors:
            raise error
        detail = f"the others stayed at capacity for {self.timeout} s" \
            if self._at_capacity(task) else ""
        raise task.all_failed(detail) from list(task.errors.values())[-1]

    def next(self, task: RoutedTask) -> RoutingDecision:
        """The next attempt's decision (lease held); raises when there is none."""
        self._check_attempts(task)
        deadline = self._deadline()
        while True:
            seen = self.router.releases
            try:
                return task.begin(self.router.select(task.task_type, exclude=tuple(task.errors),
                                                     acquire=True))
            except (NoAgentAvailable, AgentAtCapacity) as exc:
                if self._give_up(task, exc, deadline):
                    self._no_more(task, exc)
            self.router.wait_for_release(seen, _remaining(deadline))

    async def anext(self, task: RoutedTask) -> RoutingDecision:
        """Async ``next``: waits with ``asyncio.sleep``, never blocking the loop."""
        self._check_attempts(task)
        deadline = self._deadline()
        while True:
            seen = self.router.releases
            try:
                return task.begin(await self.router.aselect(
                    task.task_type, exclude=tuple(task.errors), acquire=True))
            except (NoAgentAvailable, AgentAtCapacity) as exc:
                if self._give_up(task, exc, deadline):
                    self._no_more(task, exc)
            await self.router.await_for_release(seen, _remaining(deadline))


def _remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (a ``time.monotonic`` value), never negative."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())

"""Errors the router raises; each message names the thing that is wrong."""

from __future__ import annotations

from collections.abc import Iterable

from trustroute.profiles.store.errors import PicklableError
from trustroute.profiles.validation import did_you_mean as close_names


class RouterError(PicklableError):
    """Base class of router errors."""


class NoAgentAvailable(RouterError, LookupError):
    """No registered, enabled agent can take a task of this type right now."""

    def __init__(self, task_type: str, detail: str = "") -> None:
        self.task_type = task_type
        msg = f"no agent available for task type {task_type!r}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


def no_agent_left(task_type: str, excluded: int, full: int, held: int) -> NoAgentAvailable:
    """Why ``select`` has no candidate: the eligible agents ``excluded`` by the caller,
    ``full`` (``max_concurrent`` tasks in flight) and ``held`` back by their ``rpm`` or
    by leases other processes hold (shared limits)."""
    why = [f"{n} eligible agent(s) {what}" for n, what in (
        (excluded, "excluded by the caller"), (full, "at capacity"),
        (held, "at their rpm limit or leased by other processes")) if n]
    return NoAgentAvailable(task_type, "; ".join(why) or
                            "no registered, enabled agent accepts it")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'coder'?)`` for the closest of ``known``, or nothing, as the
    config errors suggest keys (``profiles.validation.did_you_mean``)."""
    return close_names(name, known)


def unlisted_agent(agent_id: str, known: Iterable[str]) -> str:
    """The warning for an outcome of an agent the router does not list."""
    return (f"recording agent {agent_id!r}, which this router does not list"
            f"{did_you_mean(agent_id, known) or ' (a typo?)'}; recorded all the same "
            "(unknown_agents: error would refuse it)")


class UnknownAgent(RouterError, KeyError):
    """An agent id that is not registered with this router."""

    def __init__(self, agent_id: str, known: Iterable[str] = ()) -> None:
        self.agent_id = agent_id
        super().__init__(f"unknown agent {agent_id!r}{did_you_mean(agent_id, known)}")

    def __str__(self) -> str:
        return str(self.args[0])


class AgentAtCapacity(RouterError):
    """The agent already runs ``max_concurrent`` tasks."""

    def __init__(self, agent_id: str, limit: int) -> None:
        self.agent_id = agent_id
        super().__init__(f"agent {agent_id!r} is at capacity ({limit} tasks in flight)")


class CapacityTimeout(AgentAtCapacity, NoAgentAvailable):
    """Every eligible agent stayed at capacity (or at its rate limit) for the whole wait
    for a free slot (RoutedRunnable's ``capacity_timeout``). An ``AgentAtCapacity``, what
    a service answers with back-pressure (429), and a ``NoAgentAvailable``, what
    ``select`` says of a full pool, so either ``except`` catches it; ``agent_ids`` are
    the agents that were full (``agent_id`` the first of them)."""

    def __init__(self, task_type: str, agent_ids: Iterable[str], waited_s: float) -> None:
        self.task_type = task_type
        self.agent_ids = tuple(agent_ids)
        self.agent_id = self.agent_ids[0] if self.agent_ids else ""
        self.waited_s = waited_s
        RouterError.__init__(
            self, f"no agent available for task type {task_type!r}: every eligible agent "
            f"({', '.join(map(repr, self.agent_ids))}) was still at capacity after "
            f"waiting {waited_s:g} s (capacity_timeout)")


class AgentRateLimited(AgentAtCapacity):
    """The agent has started ``rpm`` calls in the last 60 seconds."""

    def __init__(self, agent_id: str, rpm: int) -> None:
        self.agent_id = agent_id
        RouterError.__init__(self, f"agent {agent_id!r} is at its rate limit ({rpm} calls "
                             "started in the last minute)")


class UnknownStrategy(RouterError, ValueError):
    """A strategy name that is not registered."""


class UnknownDecision(RouterError, KeyError):
    """A feedback ref (decision, record or run id) that names nothing in the store."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        super().__init__(f"unknown ref {ref!r}: no decision, execution or LangChain run "
                         "has that id")

    def __str__(self) -> str:
        return str(self.args[0])

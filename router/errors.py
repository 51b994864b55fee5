"""Errors the router raises; each message names the thing that is wrong."""

from __future__ import annotations

from trustroute.profiles.store.errors import PicklableError


class RouterError(PicklableError):
    """Base class of router errors."""


class NoAgentAvailable(RouterError, LookupError):
    """No registered, enabled agent can take a task of this type right now."""

    def __init__(self, task_type: str, detail: str = "") -> None:
        self.task_type = task_type
        msg = f"no agent available for task type {task_type!r}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class UnknownAgent(RouterError, KeyError):
    """An agent id that is not registered with this router."""

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(f"unknown agent {agent_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class AgentAtCapacity(RouterError):
    """The agent already runs ``max_concurrent`` tasks."""

    def __init__(self, agent_id: str, limit: int) -> None:
        self.agent_id = agent_id
        super().__init__(f"agent {agent_id!r} is at capacity ({limit} tasks in flight)")


class AgentRateLimited(AgentAtCapacity):
    """The agent has started ``rpm`` calls in the last 60 seconds."""

    def __init__(self, agent_id: str, rpm: int) -> None:
        self.agent_id = agent_id
        RouterError.__init__(self, f"agent {agent_id!r} is at its rate limit ({rpm} calls "
                             "started in the last minute)")


class UnknownStrategy(RouterError, ValueError):
    """A strategy name that is not registered."""


class UnknownDecision(RouterError, KeyError):
    """A decision id this router has no record of."""

    def __init__(self, decision_id: str) -> None:
        super().__init__(f"unknown decision {decision_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])

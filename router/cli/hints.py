"""Telling a typo from something new: a task type or agent the store has no outcome of,
next to the closest one it has (``errors.did_you_mean``, as config keys get)."""

from __future__ import annotations

from collections.abc import Iterable

from trustroute.router.errors import did_you_mean
from trustroute.router.router import AgentRouter


def stored_task_types(router: AgentRouter) -> set[str]:
    """The task types the store has outcomes of."""
    return {state.task_type for state in router.book}


def stored_agents(router: AgentRouter) -> set[str]:
    """The agents the store has outcomes of."""
    return {state.agent_id for state in router.book}


def new_task_type_hint(router: AgentRouter, task_type: str) -> str:
    """`` (did you mean 'code'?)`` when the store has no outcome of ``task_type`` but
    has one of a close name; '' otherwise (a task type that is new is fine)."""
    known = stored_task_types(router)
    return "" if task_type in known else did_you_mean(task_type, known)


def new_agent_hint(router: AgentRouter, agent_id: str, listed: Iterable[str]) -> str:
    """The same for an agent that neither ``listed`` (the config's agents) nor the
    store knows."""
    known = stored_agents(router) | set(listed)
    return "" if agent_id in known else did_you_mean(agent_id, known)

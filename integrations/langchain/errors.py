"""Errors of the LangChain integration; each message names what is wrong."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trustroute.router.errors import RouterError


class AgentsMismatch(RouterError, ValueError):
    """The runnables given to ``RoutedRunnable`` do not match the router's agents."""

    def __init__(self, missing: Iterable[str], unknown: Iterable[str]) -> None:
        self.missing = sorted(missing)
        self.unknown = sorted(unknown)
        parts = []
        if self.missing:
            parts.append(f"no runnable given for router agent(s) {self.missing}")
        if self.unknown:
            parts.append(f"runnable(s) given for agent(s) the router does not know "
                         f"{self.unknown}")
        super().__init__("RoutedRunnable agents do not match the router: " + "; ".join(parts))


class AllAgentsFailed(RouterError):
    """Every agent tried on one task raised; ``errors`` maps agent id to its exception."""

    def __init__(self, task_type: str, errors: Mapping[str, BaseException],
                 detail: str = "") -> None:
        self.task_type = task_type
        self.errors = dict(errors)
        lines = [f"  {agent}: {type(exc).__name__}: {exc}" for agent, exc in self.errors.items()]
        head = (f"all {len(self.errors)} agent(s) tried for task type {task_type!r} failed"
                + (f" ({detail})" if detail else ""))
        super().__init__("\n".join([head + ":", *lines]))


class TaskTypeError(RouterError, ValueError):
    """The task type could not be worked out from the input."""

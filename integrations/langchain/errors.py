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


_ATTACHED = "trustroute_all_agents_failed"  # where ``attach`` keeps the summary


class AllAgentsFailed(RouterError):
    """Every agent tried on one task raised; ``errors`` maps agent id to its exception,
    in the order tried.

    ``RoutedRunnable`` does not raise this type: like LangChain's
    ``RunnableWithFallbacks`` it raises the first agent's own exception, so ``except``
    clauses and ``with_retry(retry_if_exception_type=...)`` keyed on a provider's error
    keep working. The summary is attached to that exception: its text as a note (shown
    in the traceback) and the object itself through ``AllAgentsFailed.of(error)``.
    """

    def __init__(self, task_type: str, errors: Mapping[str, BaseException],
                 detail: str = "") -> None:
        self.task_type = task_type
        self.errors = dict(errors)
        lines = [f"  {agent}: {type(exc).__name__}: {exc}" for agent, exc in self.errors.items()]
        head = (f"all {len(self.errors)} agent(s) tried for task type {task_type!r} failed"
                + (f" ({detail})" if detail else ""))
        super().__init__("\n".join([head + ":", *lines]))

    def attach(self) -> BaseException:
        """The first agent's exception, carrying this summary; this summary itself when
        no agent was tried."""
        if not self.errors:
            return self
        first = next(iter(self.errors.values()))
        earlier = getattr(first, _ATTACHED, None)  # an exception object raised again
        if earlier is not None and str(earlier) in getattr(first, "__notes__", ()):
            first.__notes__.remove(str(earlier))  # one summary: this task's
        setattr(first, _ATTACHED, self)
        first.add_note(str(self))
        return first

    @classmethod
    def of(cls, error: BaseException) -> AllAgentsFailed | None:
        """The summary attached to ``error`` by a RoutedRunnable whose agents all failed
        (None for any other error)."""
        if isinstance(error, cls):
            return error
        attached = getattr(error, _ATTACHED, None)
        return attached if isinstance(attached, cls) else None


class TaskTypeError(RouterError, ValueError):
    """The task type could not be worked out from the input."""

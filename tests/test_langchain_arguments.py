"""Bad arguments of the LangChain runnables are one-line errors naming the argument (and
the agent); a task type that cannot be stored is a TaskTypeError naming its input key."""

from __future__ import annotations

from typing import Any

import pytest
from handoff_helpers import faq_store
from langchain_helpers import tagged

from trustroute.integrations.langchain import HandoffRunnable, RoutedRunnable, TaskTypeError
from trustroute.router import AgentRouter


def routed(given: AgentRouter, **kwargs: Any) -> RoutedRunnable:
    return RoutedRunnable(**{"router": given, "agents": {"a": tagged("a"), "b": tagged("b")},
                             "task_type": "kind", **kwargs})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_attempts": 0}, "max_attempts: expected a value greater than or equal to 1, got 0"),
    ({"capacity_timeout": -1}, "capacity_timeout: expected a value greater than or equal to 0"),
    ({"success_threshold": 2}, "success_threshold: expected a value less than or equal to 1"),
    ({"evaluate": "later"}, "evaluate: expected 'inline' or 'background', got 'later'"),
    ({"quality": "traces"}, "quality: expected 'trace', got 'traces'"),
    ({"exceptions_to_handle": ValueError}, "exceptions_to_handle: expected a valid tuple"),
    ({"evaluater": print}, "evaluater: unknown argument 'evaluater' (did you mean 'evaluate' "
     "or 'evaluator'?)"),  # both, as they are almost equally close
    ({"router": "x"}, "router: expected an instance of AgentRouter, got 'x'"),
])
def test_constructor_errors_are_one_line_naming_the_argument(
        router: AgentRouter, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        routed(router, **kwargs)
    text = str(info.value)
    assert "\n" not in text and "errors.pydantic.dev" not in text
    assert text.startswith("bad RoutedRunnable arguments: ") and message in text


def test_a_missing_argument_is_named(router: AgentRouter) -> None:
    with pytest.raises(ValueError, match=r"^bad RoutedRunnable arguments: task_type: "
                                         r"required argument is missing$"):
        RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")})


@pytest.mark.parametrize("agent", [42, None])
def test_a_bad_agent_names_the_agent(router: AgentRouter, agent: Any) -> None:
    with pytest.raises(TypeError, match=rf"^agents\['a'\] must be a Runnable, a callable or a "
                                        rf"dict of them, got {agent}$"):
        RoutedRunnable(router=router, agents={"a": agent, "b": tagged("b")}, task_type="kind")


@pytest.mark.parametrize("source", [None, "faq"])
def test_handoff_runnable_refuses_what_cannot_retrieve_at_construction(source: Any) -> None:
    with pytest.raises(TypeError, match=r"^retriever_or_vectorstore must be a vector store "
                                        r"or a retriever, got "):
        HandoffRunnable(source, tagged("answer"))
    with pytest.raises(TypeError, match=r"^answer_chain must be a Runnable"):
        HandoffRunnable(faq_store(), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kind", "problem"), [
    ("x" * 300, "is 300 characters long; the limit is 256"),
    ("billing\nrefunds", "must not contain control characters (U+000A at position 7)"),
])
def test_a_task_type_that_cannot_be_stored_is_a_task_type_error(
        router: AgentRouter, kind: str, problem: str) -> None:
    with pytest.raises(TaskTypeError) as info:
        routed(router).invoke({"kind": kind})
    assert str(info.value) == f"the task type from input key 'kind' {problem}"
    assert router.store.executions.count() == 0

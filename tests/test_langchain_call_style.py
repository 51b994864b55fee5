"""An agent called in a style it has no implementation for (an async-only agent on a
sync call, a sync-only generator on an async one) is not judged: LangChain's error for
it is neither recorded nor counted, and the next agent takes the task. The agent's own
errors, even worded the same, are still judged (integrations/langchain/call_style.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableGenerator, RunnableLambda
from langchain_helpers import chunks, executions, prefer, run, tagged

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.router import AgentRouter

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph

LOGGER = "trustroute.integrations.langchain.failures"


class State(TypedDict, total=False):
    out: str


def async_graph() -> Any:
    """A LangGraph agent whose node is ``async def`` (it calls an async client)."""
    async def think(state: State) -> State:
        await asyncio.sleep(0)
        return {"out": "a"}

    graph = StateGraph(State)
    graph.add_node("think", think)
    graph.add_edge(START, "think")
    graph.add_edge("think", END)
    return graph.compile()


def records(router: AgentRouter, agent_id: str) -> list[bool]:
    return [e["success"] for e in executions(router) if e["agent_id"] == agent_id
            and e["metadata"]]


@pytest.mark.parametrize("mode", ["invoke", "batch", "stream"])
def test_an_async_only_agent_on_a_sync_call_is_not_judged(
        router: AgentRouter, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """It used to be recorded as a's failure, so the router stopped sending a the async
    traffic too, where it works."""
    prefer(router, "a", "t")  # a is chosen first
    b = RunnableLambda(lambda state: {"out": "b"})
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                            agents={"a": async_graph(), "b": b})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        if mode == "stream":
            assert chunks(routed, mode, {}) == [{"out": "b"}]
        else:
            assert run(routed, mode, {}) == {"out": "b"}
    assert records(router, "a") == [] and records(router, "b") == [True]
    assert router.in_flight("a") == router.in_flight("b") == 0
    (warning,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert 'No synchronous function provided to "think"' in warning
    assert "not recorded: the agent has no implementation for a sync call" in warning
    assert asyncio.run(routed.ainvoke({})) == {"out": "a"}  # where it works
    assert records(router, "a") == [True]


def test_a_sync_only_generator_on_an_async_call_is_not_judged(router: AgentRouter) -> None:
    def words(inputs: Iterator[Any]) -> Iterator[str]:
        for _ in inputs:
            pass
        yield "a "
        yield "says"

    prefer(router, "a", "t")
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                            agents={"a": RunnableGenerator(words), "b": tagged("b")})
    assert run(routed, "astream", "x") == "b:x"
    assert asyncio.run(routed.ainvoke("x")) == "b:x"
    assert records(router, "a") == []
    assert run(routed, "stream", "x") == "a says"  # where it works
    assert records(router, "a") == [True]


async def lookup(x: Any) -> str:
    return "found"


def own_words(x: Any) -> str:  # LangGraph's wording, raised by the agent's own code
    raise TypeError('No synchronous function provided to "lookup".')


def misuses(x: Any) -> str:  # calls an async-only runnable synchronously, inside
    return str(RunnableLambda(lookup).invoke(x))


@pytest.mark.parametrize(("agent", "mode"), [(own_words, "invoke"), (own_words, "ainvoke"),
                                             (misuses, "ainvoke")])
def test_the_agents_own_errors_worded_alike_are_judged(router: AgentRouter, agent: Any,
                                                       mode: str) -> None:
    """Only LangChain's own error for the call style the router used is not judged
    (on a sync call, ``misuses`` raises exactly what an async-only agent raises)."""
    prefer(router, "a", "t")
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                            agents={"a": RunnableLambda(agent), "b": tagged("b")})
    assert run(routed, mode, "x") == "b:x"
    assert records(router, "a") == [False]

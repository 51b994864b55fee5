"""TraceCollector on a real tool-calling agent (LangGraph ReAct agent over a fake chat
model and real tools), and RoutedRunnable(quality="trace") recording the trace score."""

from __future__ import annotations

import asyncio
import itertools
import warnings
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import ToolException, tool
from langchain_helpers import executions, failing, prefer

from trustroute.integrations.langchain import (
    RoutedRunnable,
    TraceCollector,
    TraceQualityWarning,
    fixed_task_type,
)
from trustroute.router import AgentRouter
from trustroute.router.trace import NoveltyCache, evaluate_value

prebuilt = pytest.importorskip("langgraph.prebuilt")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore:create_react_agent:Warning")


class ToolCallingFake(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools (it already answers with tool calls)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@tool
def flaky(a: int) -> int:
    """Always fails (the agent must recover)."""
    raise ToolException("service unavailable")


flaky.handle_tool_error = True


def script(*messages: AIMessage) -> ToolCallingFake:
    return ToolCallingFake(messages=itertools.cycle(messages))


ADD_THEN_MUL = (
    AIMessage(content="I will add first", tool_calls=[
        {"name": "add", "args": {"a": 1, "b": 2}, "id": "call-1"}]),
    AIMessage(content="", tool_calls=[{"name": "mul", "args": {"a": 3, "b": 4}, "id": "call-2"}]),
    AIMessage(content="The answer is 12"),
)


def react(*messages: AIMessage, tools: list[Any] | None = None) -> Any:
    return prebuilt.create_react_agent(script(*messages), tools or [add, mul])


def test_collector_turns_a_tool_agent_run_into_steps() -> None:
    collector = TraceCollector()
    out = react(*ADD_THEN_MUL).invoke({"messages": [("user", "compute")]},
                                      {"callbacks": [collector]})
    assert out["messages"][-1].content == "The answer is 12"
    steps = [(s.type, s.tool) for s in collector.steps]
    assert steps == [("thought", None), ("tool_call", "add"), ("observation", "add"),
                     ("tool_call", "mul"), ("observation", "mul"), ("thought", None)]
    assert collector.steps[1].input == {"a": 1, "b": 2}
    assert collector.steps[2].content == "3"


def test_collector_records_tool_errors_and_the_recovery() -> None:
    messages = (
        AIMessage(content="try the service", tool_calls=[
            {"name": "flaky", "args": {"a": 1}, "id": "f-1"}]),
        AIMessage(content="fall back to adding", tool_calls=[
            {"name": "add", "args": {"a": 1, "b": 1}, "id": "f-2"}]),
        AIMessage(content="It is 2"),
    )
    collector = TraceCollector()
    react(*messages, tools=[flaky, add]).invoke({"messages": [("user", "go")]},
                                                {"callbacks": [collector]})
    kinds = [s.type for s in collector.steps]
    assert kinds == ["thought", "tool_call", "error", "thought", "tool_call", "observation",
                     "thought"]
    assert "service unavailable" in collector.steps[2].content
    trace = collector.trace(success=True, task_domain="code")
    assert trace.steps[2].tool == "flaky"


def test_an_error_passing_through_enclosing_runs_is_one_step_naming_the_tool() -> None:
    @tool
    def broken(a: int) -> int:
        """Always raises."""
        raise ValueError("bad tool")

    collector = TraceCollector()
    chain = RunnableLambda(lambda x: x) | RunnableLambda(lambda x: broken.invoke({"a": x}))
    with pytest.raises(ValueError, match="bad tool"):
        chain.invoke(1, {"callbacks": [collector]})
    assert [(s.type, s.tool) for s in collector.steps] == [("tool_call", "broken"),
                                                          ("error", "broken")]
    assert collector.steps[1].content == "ValueError: bad tool"


def test_quality_trace_records_the_trace_score() -> None:
    with AgentRouter(agents=["tools", "plain"], store="mem://", seed=0) as r:
        prefer(r, "tools", "code")
        routed = RoutedRunnable(router=r, task_type=fixed_task_type("code"), quality="trace",
                                agents={"tools": react(*ADD_THEN_MUL), "plain": failing()})
        routed.invoke({"messages": [("user", "compute 3*4")]})
        # thought, add, obs, mul, obs, thought: C = .5·3/4 + .2·6/20 = .435; D = 1; O = 1;
        # N = .5 (no embedder); "code" weights .20/.30/.30/.20
        expected = 0.435 * .2 + .5 * .3 + 1 * .3 + 1 * .2
        assert executions(r)[-1]["quality"] == pytest.approx(expected)
        assert executions(r)[-1]["success"] is True


def test_quality_trace_uses_novelty_from_the_embedder() -> None:
    with AgentRouter(agents=["tools", "plain"], store="mem://", seed=0) as r:
        prefer(r, "tools", "code")
        cache = NoveltyCache()
        routed = RoutedRunnable(router=r, task_type=fixed_task_type("code"), quality="trace",
                                embedder=DeterministicFakeEmbedding(size=64),
                                novelty_cache=cache,
                                agents={"tools": react(*ADD_THEN_MUL), "plain": failing()})
        request = {"messages": [("user", "compute 3*4")]}
        routed.invoke(request)
        routed.invoke(request)
        first, second = (e["quality"] for e in executions(r)[-2:])
        assert first - second == pytest.approx(0.5 * 0.30, abs=1e-4)  # N: 0.5 -> 0
        assert len(cache) == 2


def test_quality_trace_of_a_plain_runnable_and_of_failures() -> None:
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0) as r:
        prefer(r, "a", "chat")
        model = GenericFakeChatModel(messages=itertools.cycle([AIMessage(content="hi")]))
        routed = RoutedRunnable(router=r, task_type=fixed_task_type("chat"), quality="trace",
                                agents={"a": failing(), "b": model})
        with pytest.warns(TraceQualityWarning, match="single thought"):
            routed.invoke("hello")
        failure, success = executions(r)[-2:]
        assert (failure["success"], failure["quality"]) == (False, 0.0)
        # a single thought: the override gives exactly 0.1
        assert success["quality"] == pytest.approx(0.1)


def test_collected_trace_scores_like_a_hand_built_one() -> None:
    collector = TraceCollector()
    react(*ADD_THEN_MUL).invoke({"messages": [("user", "x")]}, {"callbacks": [collector]})
    trace = collector.trace(success=True, confidence=0.5, task_domain="finance",
                            objective="x")
    # finance: .20/.25/.10/.45 with C .435, N .5, D 1, O .5
    assert evaluate_value(trace) == pytest.approx(0.435 * .2 + .5 * .25 + .1 + .5 * .45)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_quality_trace_warns_once_when_every_run_is_a_single_thought(mode: str) -> None:
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0) as r:
        prefer(r, "a", "chat")
        model = GenericFakeChatModel(messages=itertools.cycle([AIMessage(content="hi")]))
        routed = RoutedRunnable(router=r, task_type=fixed_task_type("chat"), quality="trace",
                                agents={"a": model, "b": failing()})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # our own once-per-runnable, not the registry
            for _ in range(3):
                routed.invoke("hello") if mode == "invoke" else asyncio.run(routed.ainvoke("hello"))
        (warning,) = [w for w in caught if "single thought" in str(w.message)]
        text = str(warning.message)
        assert "agent 'a'" in text and "scores 0.1" in text and "evaluator=" in text
        assert [e["quality"] for e in executions(r)[-3:]] == pytest.approx([0.1] * 3)
        other = RoutedRunnable(router=r, task_type=fixed_task_type("chat"), quality="trace",
                               agents={"a": model, "b": failing()})
        with pytest.warns(UserWarning, match="single thought"):  # once per runnable
            other.invoke("hello")

"""Automatic outcome recording: evaluator verdicts, latency, token cost from
usage_metadata at per-agent prices, and trace quality."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_helpers import chat, executions, prefer, tagged

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.router import AgentRouter

PRICED = [{"id": "gpt", "price_per_1k_input_tokens": 0.5, "price_per_1k_output_tokens": 1.5},
          {"id": "cheap", "cost_per_call": 0.01}]


@pytest.fixture
def priced() -> Any:
    with AgentRouter(agents=PRICED, store="mem://", seed=0) as r:
        prefer(r, "gpt", "t")
        yield r


def test_cost_is_tokens_times_the_agents_prices(priced: AgentRouter) -> None:
    routed = RoutedRunnable(router=priced, task_type=fixed_task_type("t"),
                            agents={"gpt": chat("hello", usage=(1200, 300)),
                                    "cheap": tagged("cheap")})
    routed.invoke("hi")
    asyncio.run(routed.ainvoke("hi"))
    "".join(str(c.content) for c in routed.stream("hi"))  # streamed: usage via callbacks
    rows = executions(priced)[-3:]
    # 1200/1000·0.5 + 300/1000·1.5 = 0.6 + 0.45
    assert [r["cost"] for r in rows[:2]] == [pytest.approx(1.05)] * 2
    assert rows[2]["agent_id"] == "gpt"


def test_cost_through_a_chain_ending_in_a_string_parser(priced: AgentRouter) -> None:
    prompt = ChatPromptTemplate.from_messages([("human", "{q}")])
    agent = prompt | chat("forty-two", usage=(100, 20)) | StrOutputParser()
    routed = RoutedRunnable(router=priced, task_type=fixed_task_type("t"),
                            agents={"gpt": agent, "cheap": tagged("cheap")})
    assert routed.invoke({"q": "meaning?"}) == "forty-two"
    assert executions(priced)[-1]["cost"] == pytest.approx(0.1 * 0.5 + 0.02 * 1.5)


def test_cost_from_an_ai_message_built_without_a_model(priced: AgentRouter) -> None:
    made = RunnableLambda(lambda x: AIMessage(content="ok", usage_metadata={
        "input_tokens": 2000, "output_tokens": 0, "total_tokens": 2000}))
    routed = RoutedRunnable(router=priced, task_type=fixed_task_type("t"),
                            agents={"gpt": made, "cheap": tagged("cheap")})
    routed.invoke("x")
    assert executions(priced)[-1]["cost"] == pytest.approx(1.0)


def test_history_messages_in_the_input_are_not_charged_again(priced: AgentRouter) -> None:
    old = AIMessage(content="earlier", id="old-1", usage_metadata={
        "input_tokens": 9000, "output_tokens": 9000, "total_tokens": 18000})
    echo = RunnableLambda(lambda msgs: [*msgs, AIMessage(content="new", usage_metadata={
        "input_tokens": 1000, "output_tokens": 0, "total_tokens": 1000})])
    routed = RoutedRunnable(router=priced, task_type=fixed_task_type("t"),
                            agents={"gpt": echo, "cheap": tagged("cheap")})
    routed.invoke([HumanMessage(content="hi"), old])
    assert executions(priced)[-1]["cost"] == pytest.approx(0.5)


def test_no_prices_or_no_usage_fall_back_to_cost_per_call(priced: AgentRouter) -> None:
    prefer(priced, "cheap", "u")
    routed = RoutedRunnable(router=priced, task_type=fixed_task_type("u"),
                            agents={"gpt": chat("x", usage=(10, 10)),
                                    "cheap": chat("y", usage=(500, 500))})
    routed.invoke("q")
    assert executions(priced)[-1]["agent_id"] == "cheap"
    assert executions(priced)[-1]["cost"] == pytest.approx(0.01)  # no token prices
    prefer(priced, "gpt", "v")
    RoutedRunnable(router=priced, task_type=fixed_task_type("v"),
                   agents={"gpt": tagged("gpt"), "cheap": tagged("cheap")}).invoke("q")
    assert executions(priced)[-1].get("cost") is None  # priced agent, but no usage reported


def test_latency_is_the_agents_time(router: AgentRouter) -> None:
    def slow(x: str) -> str:
        time.sleep(0.05)
        return x

    routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                            agents={"a": RunnableLambda(slow), "b": RunnableLambda(slow)})
    routed.invoke("x")
    latency = executions(router)[-1]["latency_ms"]
    assert 45 <= latency < 1000


def test_evaluator_verdicts(router: AgentRouter) -> None:
    prefer(router, "a", "t")
    agents = {"a": tagged("a"), "b": tagged("b")}
    seen: list[tuple[Any, Any]] = []

    def judge(i: Any, o: Any) -> bool:
        seen.append((i, o))
        return o.endswith("good")

    routed = RoutedRunnable(router=router, agents=agents, task_type=fixed_task_type("t"),
                            evaluator=judge)
    assert routed.invoke("good") == "a:good"
    assert routed.invoke("bad") == "a:bad"  # a wrong answer is returned, recorded as failure
    assert seen == [("good", "a:good"), ("bad", "a:bad")]
    scored = RoutedRunnable(router=router, agents=agents, task_type=fixed_task_type("t"),
                            evaluator=lambda i, o: 0.3 if i == "low" else 0.8)
    scored.invoke("low")
    scored.invoke("high")
    rows = executions(router)[-4:]
    assert [(r["success"], r["quality"]) for r in rows] == \
        [(True, 1.0), (False, 0.0), (False, 0.3), (True, 0.8)]
    assert router.store.executions.count() == 24  # no fallback on an evaluator failure
    numpy_judged = RoutedRunnable(  # a judge computing with numpy returns numpy scalars
        router=router, agents=agents, task_type=fixed_task_type("t"),
        evaluator=lambda i, o: np.float64(0.7) if i == "x" else np.bool_(False))
    assert numpy_judged.invoke("x") == "a:x" and numpy_judged.invoke("y") == "a:y"
    assert [(r["success"], r["quality"]) for r in executions(router)[-2:]] == \
        [(True, 0.7), (False, 0.0)]


def test_async_evaluator_and_bad_verdicts(router: AgentRouter) -> None:
    agents = {"a": tagged("a"), "b": tagged("b")}

    async def judge(i: Any, o: Any) -> float:
        await asyncio.sleep(0)
        return 0.9

    routed = RoutedRunnable(router=router, agents=agents, task_type=fixed_task_type("t"),
                            evaluator=judge)
    asyncio.run(routed.ainvoke("x"))
    assert executions(router)[-1]["quality"] == pytest.approx(0.9)
    class AsyncJudge:  # an LLM judge as a class: its __call__ is the coroutine
        async def __call__(self, i: Any, o: Any) -> float:
            return 0.9

    ran: list[Any] = []
    for async_judge in (judge, AsyncJudge()):
        watched = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                                 evaluator=async_judge,
                                 agents={n: RunnableLambda(ran.append) for n in ("a", "b")})
        for call in (watched.invoke, lambda x, w=watched: list(w.stream(x)), watched.batch):
            with pytest.raises(TypeError, match="the evaluator is async, so judge inline "
                                                "with ainvoke or astream"):
                call(["x"] if call == watched.batch else "x")
    assert ran == []  # refused before any agent worked for nothing
    bad = RoutedRunnable(router=router, agents=agents, task_type=fixed_task_type("t"),
                         evaluator=lambda i, o: 1.7)
    with pytest.raises(ValueError, match=r"bool or a number in \[0, 1\], got 1.7"):
        bad.invoke("x")
    assert router.store.executions.count() == 1
    assert router.in_flight("a") == router.in_flight("b") == 0

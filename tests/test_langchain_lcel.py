"""RoutedRunnable as a LangChain citizen: child runs named after the agent, routing
metadata, config propagation, LCEL composition, with_retry / with_fallbacks /
with_config, astream_events."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_helpers import RunLog, chat, executions, failing, prefer, tagged

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.router import AgentRouter


def routed_ab(router: AgentRouter, **kwargs: Any) -> RoutedRunnable:
    return RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                          **{"task_type": fixed_task_type("code"), **kwargs})


def test_callback_sees_the_agent_as_a_child_run_with_routing_metadata(
        router: AgentRouter) -> None:
    prefer(router, "b", "code")
    log = RunLog()
    assert routed_ab(router).invoke("x", {"callbacks": [log]}) == "b:x"
    (parent,) = log.named("RoutedRunnable")
    (child,) = log.named("b")
    assert parent["parent_run_id"] is None
    assert child["parent_run_id"] == parent["run_id"]
    stored = executions(router)[-1]
    for run in (parent, child):
        meta = run["metadata"]
        assert meta["task_type"] == "code" and meta["task_id"] == stored["metadata"]["task_id"]
    meta = child["metadata"]
    assert (meta["agent_id"], meta["decision_id"]) == ("b", stored["decision_id"])
    assert isinstance(meta["score"], float)
    # the routed run starts before the agent is chosen: it is credited when the run ends
    assert "agent_id" not in parent["metadata"]
    assert not log.named("a")


def test_config_reaches_the_chosen_agent(router: AgentRouter) -> None:
    seen: list[RunnableConfig] = []

    def agent(x: str, config: RunnableConfig) -> str:
        seen.append(config)
        return x.upper()

    log = RunLog()
    routed = RoutedRunnable(router=router, agents={"a": RunnableLambda(agent),
                                                   "b": RunnableLambda(agent)},
                            task_type=fixed_task_type("code"))
    out = routed.invoke("x", {"callbacks": [log], "tags": ["team-x"], "run_name": "my-router",
                              "metadata": {"user": "ann"}, "max_concurrency": 3})
    assert out == "X"
    (config,) = seen
    assert "team-x" in config["tags"]
    assert config["metadata"]["user"] == "ann" and config["max_concurrency"] == 3
    (parent,) = log.named("my-router")  # run_name names the routed run itself
    child = next(s for s in log.starts if s["parent_run_id"] == parent["run_id"])
    assert child["name"] in ("a", "b") and "team-x" in child["tags"]
    assert child["metadata"]["user"] == "ann" and child["metadata"]["agent_id"] == child["name"]


def test_inside_lcel_prompt_routed_parser() -> None:
    with AgentRouter(agents=["quick", "careful"], store="mem://", seed=1) as r:
        prefer(r, "careful", "qa")
        prompt = ChatPromptTemplate.from_messages([("human", "Answer: {question}")])
        routed = RoutedRunnable(router=r, task_type=fixed_task_type("qa"), agents={
            "quick": FakeListChatModel(responses=["quick answer"] * 5),
            "careful": FakeListChatModel(responses=["careful answer"] * 5)})
        chain = prompt | routed | StrOutputParser()
        assert chain.invoke({"question": "why?"}) == "careful answer"
        assert "".join(chain.stream({"question": "why?"})) == "careful answer"
        assert asyncio.run(chain.ainvoke({"question": "why?"})) == "careful answer"
        assert chain.batch([{"question": "1"}, {"question": "2"}]) == ["careful answer"] * 2
        assert r.store.executions.count() == 20 + 5


def test_with_config_names_the_run_and_adds_tags(router: AgentRouter) -> None:
    log = RunLog()
    configured = routed_ab(router).with_config(run_name="triage", tags=["t1"])
    configured.invoke("x", {"callbacks": [log]})
    (parent,) = log.named("triage")
    assert "t1" in parent["tags"]


def test_with_fallbacks_takes_over_when_every_agent_fails(router: AgentRouter) -> None:
    routed = RoutedRunnable(router=router, agents={"a": failing("a down"),
                                                   "b": failing("b down")},
                            task_type=fixed_task_type("code"))
    safe = routed.with_fallbacks([RunnableLambda(lambda x: f"fallback:{x}")])
    assert safe.invoke("x") == "fallback:x"
    assert asyncio.run(safe.ainvoke("y")) == "fallback:y"
    assert router.store.executions.count() == 4  # two failures per task, both recorded


def test_astream_events_show_the_agent_run_and_token_stream(router: AgentRouter) -> None:
    prefer(router, "a", "chat")
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("chat"),
                            agents={"a": chat("streamed tokens here"), "b": chat("other")})

    async def collect() -> list[dict[str, Any]]:
        return [e async for e in routed.astream_events("hi", version="v2")]

    events = asyncio.run(collect())
    names = {(e["event"], e["name"]) for e in events}
    assert ("on_chain_start", "RoutedRunnable") in names
    assert ("on_chat_model_start", "a") in names
    tokens = [e["data"]["chunk"].content for e in events if e["event"] == "on_chat_model_stream"]
    assert "".join(tokens) == "streamed tokens here"
    streamed = [e for e in events if e["event"] == "on_chain_stream"
                and e["name"] == "RoutedRunnable"]
    assert len(streamed) == len(tokens)
    model_start = next(e for e in events if e["event"] == "on_chat_model_start")
    assert model_start["metadata"]["agent_id"] == "a"
    assert router.store.executions.count() == 20 + 1

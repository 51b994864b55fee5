"""RoutedRunnable on every execution path: the chosen agent's output comes back and
each call stores exactly one execution."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.base import RunnableSerializable
from langchain_helpers import chat, chunks, executions, prefer, run, tagged, word_stream

from trustroute.integrations.langchain import (
    AgentsMismatch,
    RoutedRunnable,
    TaskTypeError,
    fixed_task_type,
)
from trustroute.router import AgentRouter

MODES = ["invoke", "batch", "stream", "ainvoke", "abatch", "astream", "astream_events"]


def test_is_a_real_runnable_importable_from_the_package() -> None:
    from trustroute.integrations.langchain import RoutedRunnable as Imported

    assert Imported is RoutedRunnable
    assert issubclass(RoutedRunnable, RunnableSerializable)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("best", ["a", "b"])
def test_every_path_returns_the_chosen_agents_output(router: AgentRouter, mode: str,
                                                     best: str) -> None:
    prefer(router, best, "code")
    routed = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                            task_type=fixed_task_type("code"))
    before = router.store.executions.count()
    assert run(routed, mode, "x") == f"{best}:x"
    assert router.store.executions.count() == before + 1
    last = executions(router)[-1]
    assert (last["agent_id"], last["task_type"], last["success"]) == (best, "code", True)
    assert router.in_flight("a") == router.in_flight("b") == 0


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_streams_pass_chunks_through_unchanged(router: AgentRouter, mode: str) -> None:
    prefer(router, "b", "chat")
    routed = RoutedRunnable(router=router, agents={"a": word_stream("a"), "b": word_stream("b")},
                            task_type=fixed_task_type("chat"))
    assert chunks(routed, mode, "hi") == ["b0 ", "b1 ", "b2 "]
    assert router.store.executions.count() == 20 + 1


@pytest.mark.parametrize("mode", MODES)
def test_fake_chat_models_as_agents(router: AgentRouter, mode: str) -> None:
    prefer(router, "a", "chat")
    routed = RoutedRunnable(router=router, agents={"a": chat("alpha says hi"),
                                                   "b": chat("beta says hi")},
                            task_type=fixed_task_type("chat"))
    if mode in ("stream", "astream"):
        parts = chunks(routed, mode, "hello")
        assert all(isinstance(c, AIMessageChunk) for c in parts) and len(parts) > 1
        text = "".join(str(c.content) for c in parts)
    else:
        out = run(routed, mode, "hello")
        assert isinstance(out, AIMessage | AIMessageChunk)
        text = str(out.content)
    assert text == "alpha says hi"
    assert router.store.executions.count() == 20 + 1


def test_batch_of_many_inputs_records_one_execution_each(router: AgentRouter) -> None:
    prefer(router, "a", "code")
    routed = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                            task_type=fixed_task_type("code"))
    inputs = [str(i) for i in range(12)]
    assert routed.batch(inputs, {"max_concurrency": 3}) == [f"a:{i}" for i in inputs]
    assert router.store.executions.count() == 20 + 12
    # abatch runs all 12 at once: "a" holds at most max_concurrent=10, load spills to "b"
    outputs = asyncio.run(routed.abatch(inputs))
    assert [o.split(":")[1] for o in outputs] == inputs
    chosen = [o.split(":")[0] for o in outputs]
    assert chosen.count("a") >= 10 and set(chosen) <= {"a", "b"}
    recorded = [e["agent_id"] for e in executions(router)[-12:]]
    assert sorted(recorded) == sorted(chosen)
    assert router.in_flight("a") == router.in_flight("b") == 0


def test_task_type_fixed_key_or_callable(router: AgentRouter) -> None:
    agents = {"a": tagged("a"), "b": tagged("b")}
    RoutedRunnable(router=router, agents=agents, task_type=fixed_task_type("code")).invoke({"q": 1})
    RoutedRunnable(router=router, agents=agents, task_type="kind").invoke(
        {"kind": "math", "q": 2})
    RoutedRunnable(router=router, agents=agents,
                   task_type=lambda x: "long" if len(x) > 3 else "short").invoke("abcdef")
    assert [e["task_type"] for e in executions(router)] == ["code", "math", "long"]
    with pytest.raises(TaskTypeError, match="input key 'kind'"):
        RoutedRunnable(router=router, agents=agents, task_type="kind").invoke({"kind": 7})
    with pytest.raises(TaskTypeError, match="callable"):
        RoutedRunnable(router=router, agents=agents, task_type=lambda x: None).invoke("x")
    assert router.store.executions.count() == 3  # bad input stores nothing


def test_agents_must_match_the_router(router: AgentRouter) -> None:
    with pytest.raises(AgentsMismatch, match=r"no runnable given for router agent\(s\) \['b'\]"):
        RoutedRunnable(router=router, agents={"a": tagged("a")}, task_type=fixed_task_type("t"))
    with pytest.raises(AgentsMismatch, match=r"does not know \['c'\]"):
        RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b"),
                                              "c": tagged("c")}, task_type=fixed_task_type("t"))
    with pytest.raises(ValueError, match="do not match"):  # also a ValueError
        RoutedRunnable(router=router, agents={"x": tagged("x")}, task_type=fixed_task_type("t"))
    with pytest.raises(TypeError, match="task_type"):
        RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                       task_type=3)
    with pytest.raises(TypeError, match="agents"):
        RoutedRunnable(router=router, agents={}, task_type=fixed_task_type("t"))


def test_misspelt_options_are_rejected(router: AgentRouter) -> None:
    with pytest.raises(ValueError, match="evaluater"):
        RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                       task_type=fixed_task_type("t"), evaluater=lambda i, o: True)


def test_plain_functions_are_coerced_to_runnables(router: AgentRouter) -> None:
    prefer(router, "b", "t")
    routed = RoutedRunnable(router=router, agents={"a": lambda x: x * 2, "b": lambda x: x * 3},
                            task_type=fixed_task_type("t"))
    assert routed.invoke(2) == 6
    assert isinstance(routed.agents["a"], RunnableLambda)


def test_agents_missing_from_a_config_router(tmp_path: Any) -> None:
    config = tmp_path / "router.yaml"
    config.write_text("store: 'mem://'\nagents: [fast, careful]\n")
    with AgentRouter.from_config(config) as r:
        with pytest.raises(AgentsMismatch, match="careful"):
            RoutedRunnable(router=r, agents={"fast": tagged("fast")},
                           task_type=fixed_task_type("t"))
        routed = RoutedRunnable(router=r, agents={"fast": tagged("fast"),
                                                  "careful": tagged("careful")},
                                task_type=fixed_task_type("t"))
        assert routed.invoke("go") in ("fast:go", "careful:go")


def test_the_schemas_are_the_agents_so_as_tool_has_their_arguments(router: AgentRouter
                                                                   ) -> None:
    prompt = PromptTemplate.from_template("Q: {question}")
    agents = {name: prompt | RunnableLambda(lambda p, n=name: f"{n}: {p.to_string()}")
              for name in ("a", "b")}
    routed = RoutedRunnable(router=router, agents=agents, task_type=fixed_task_type("t"))
    assert routed.get_input_schema().model_json_schema()["required"] == ["question"]
    assert routed.get_output_schema().model_json_schema() == \
        agents["a"].get_output_schema().model_json_schema()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as_tool is a beta API of langchain-core
        tool = routed.as_tool(name="ask", description="Ask the routed agents")
    assert list(tool.args) == ["question"]
    assert tool.invoke({"question": "why?"}).endswith("Q: why?")

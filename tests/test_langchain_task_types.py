"""How a task type is read from the input, the same in RoutedRunnable and HandoffRunnable:
a string is always a key of the input mapping (a missing key is an error, never a
task type), a callable is applied to the input, and a fixed task type is explicit."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from handoff_helpers import faq_store
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_helpers import chat, chunks, executions, prefer, tagged

from trustroute.integrations.langchain import HandoffRunnable, RoutedRunnable, TaskTypeError
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.handoff.confidence import RetrievalConfidence

PROMPT = ChatPromptTemplate.from_messages([("human", "{question}")])


def models() -> dict[str, Any]:
    return {"a": chat("from a"), "b": chat("from b")}


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_a_prompt_before_the_routed_runnable_is_an_error_not_a_task_type(
        router: AgentRouter, mode: str) -> None:
    chain = PROMPT | RoutedRunnable(router=router, agents=models(), task_type="kind")
    value = {"kind": "code", "question": "why?"}
    with pytest.raises(TaskTypeError, match=r"task_type='kind'.*ChatPromptValue") as bad:
        if mode == "invoke":
            chain.invoke(value)
        elif mode == "ainvoke":
            asyncio.run(chain.ainvoke(value))
        else:
            chunks(chain, mode, value)
    assert "fixed_task_type" not in str(bad.value)  # the prompt's place is the mistake
    assert router.store.executions.count() == 0  # nothing learned under "kind"


def test_a_misspelt_key_is_an_error_naming_the_keys(router: AgentRouter) -> None:
    routed = RoutedRunnable(router=router, agents=models(), task_type="knd")
    with pytest.raises(TaskTypeError, match=r"no key 'knd'.*'kind', 'question'.*if 'knd' "
                       r"is the task type of every input, not a key"):
        routed.invoke({"kind": "code", "question": "why?"})
    assert router.store.executions.count() == 0


def test_the_documented_first_example_routes_by_the_kind_key(router: AgentRouter) -> None:
    prefer(router, "b", "code")
    routed = RoutedRunnable(router=router, task_type="kind",
                            agents={"a": PROMPT | chat("from a"), "b": PROMPT | chat("from b")})
    chain = routed | StrOutputParser()
    assert chain.invoke({"kind": "code", "question": "..."}) == "from b"
    assert executions(router)[-1]["task_type"] == "code"


def echo_chain() -> Any:
    return PromptTemplate.from_template("{question}") | RunnableLambda(lambda p: p.to_string())


def handoff_task_types(**kwargs: Any) -> list[str]:
    """Task types in the hand-off log after one answered question under ``kwargs``."""
    with Store("mem://") as store:
        rag = HandoffRunnable(faq_store(), echo_chain(), store=store,
                              confidence=RetrievalConfidence(score_threshold=0.4), **kwargs)
        rag.invoke({"question": "my card has not arrived", "kind": "cards"})
        return [row["task_type"]
                for row in store.repository(HandoffRepository).decision_stats()]


def test_handoff_runnable_reads_a_string_as_a_key_too() -> None:
    assert handoff_task_types(task_type="kind") == ["cards"]
    with pytest.raises(TaskTypeError, match="no key 'knd'"):
        handoff_task_types(task_type="knd")
    assert handoff_task_types() == ["rag"]  # the default is a fixed task type
    assert handoff_task_types(task_type=lambda x: x["kind"].upper()) == ["CARDS"]


def test_a_key_holding_no_string_is_an_error(router: AgentRouter) -> None:
    routed = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                            task_type="kind")
    with pytest.raises(TaskTypeError, match="input key 'kind'"):
        routed.invoke({"kind": 7})


def test_the_input_schema_requires_the_task_type_key_so_as_tool_works(
        router: AgentRouter) -> None:
    prefer(router, "b", "math")
    routed = RoutedRunnable(router=router, task_type="kind",
                            agents={"a": PROMPT | chat("from a"), "b": PROMPT | chat("from b")})
    schema = routed.get_input_schema().model_json_schema()
    assert schema["required"] == ["question", "kind"]  # the agents' fields are kept
    assert schema["properties"]["kind"]["type"] == "string"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as_tool is a beta API of langchain-core
        tool = routed.as_tool(name="ask", description="Ask the routed agents")
    assert sorted(tool.args) == ["kind", "question"]
    assert tool.invoke({"kind": "math", "question": "2 + 2?"}).content == "from b"
    assert executions(router)[-1]["task_type"] == "math"
    plain = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                           task_type="kind")  # an agent taking any input: a dict of the key
    assert plain.get_input_schema().model_json_schema()["required"] == ["kind"]
    assert plain.get_input_schema().model_validate({"kind": "t", "other": 1})

"""HandoffRunnable's input schema names the question (and the task-type key), so
``as_tool()`` gives a model a tool with arguments; it used to have none (input ``Any``),
and LangChain stripped the model's question from the tool call."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from handoff_helpers import faq_store
from langchain_core.runnables import RunnableLambda

from trustroute.integrations.langchain import fixed_task_type
from trustroute.integrations.langchain.handoff import HandoffRunnable
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository

COVERED = "my card has not arrived"
ANSWER = RunnableLambda(lambda x: f"answer to {x['question']}")


def tool_of(rag: HandoffRunnable) -> Any:
    with warnings.catch_warnings():  # as_tool is a beta API of LangChain's
        warnings.simplefilter("ignore")
        return rag.as_tool(name="kb", description="answers from the knowledge base")


@pytest.mark.parametrize(("options", "call", "task_type"), [
    ({}, {"question": COVERED}, "rag"),
    ({"input_key": "query"}, {"query": COVERED}, "rag"),
    ({"task_type": "kind"}, {"question": COVERED, "kind": "cards"}, "cards"),
])
def test_as_tool_takes_the_question_and_the_task_type(options: dict[str, Any],
                                                      call: dict[str, str],
                                                      task_type: str) -> None:
    with Store("mem://") as store:
        rag = HandoffRunnable(faq_store(), ANSWER, store=store,
                              confidence={"score_threshold": 0.2}, **options)
        tool = tool_of(rag)
        assert set(tool.args) == set(call)  # each a required string
        assert tool.tool_call_schema.model_json_schema()["required"] == list(call)
        assert tool.invoke(call) == f"answer to {COVERED}"
        (stats,) = store.repository(HandoffRepository).decision_stats()
        assert (stats["task_type"], stats["decisions"], stats["transferred"]) == \
            (task_type, 1, 0)


def test_a_string_input_still_works_and_the_repr_says_what_it_is() -> None:
    rag = HandoffRunnable(faq_store(), ANSWER, confidence={"score_threshold": 0.2},
                          task_type=fixed_task_type("cards"))
    assert rag.invoke(COVERED) == f"answer to {COVERED}"
    assert repr(rag) == ("HandoffRunnable(name='HandoffRunnable', task_type="
                         "fixed_task_type('cards'), k=4, handoff_output='result')")

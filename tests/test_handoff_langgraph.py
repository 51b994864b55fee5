"""The LangGraph adapter: a hand-off pauses the graph for a person, who resumes it."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from handoff_helpers import faq_store
from langchain_core.runnables import RunnableLambda

from trustroute.integrations.langchain.handoff import HandoffResult, HandoffRunnable
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.config import RouterConfig
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest

langgraph = pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command  # noqa: E402

from trustroute.integrations.langgraph import LangGraphInterruptHook  # noqa: E402


class State(TypedDict, total=False):
    question: str
    answer: str
    human: Any


def build_graph(store: Store, notified: list[str]) -> Any:
    rag = HandoffRunnable(
        faq_store(),
        RunnableLambda(lambda x: "bot: " + x["context"][:30]),
        confidence=RetrievalConfidence(score_threshold=0.4),
        hooks=[LangGraphInterruptHook(), lambda r: notified.append(r.request_id)],
        store=store,
        task_type="cards",
    )

    def respond(state: State) -> State:
        out = rag.invoke(state["question"])
        if isinstance(out, HandoffResult):
            return {"answer": out.message, "human": out.human_response}
        return {"answer": out}

    graph = StateGraph(State)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    return graph.compile(checkpointer=InMemorySaver())


def test_handoff_interrupts_the_graph_and_resumes_with_the_answer() -> None:
    notified: list[str] = []
    with Store("mem://") as store:
        graph = build_graph(store, notified)
        thread = {"configurable": {"thread_id": "t-1"}}
        paused = graph.invoke({"question": "can I buy bitcoin with crypto"}, thread)
        assert "__interrupt__" in paused
        payload = paused["__interrupt__"][0].value["handoff"]
        request = TransferRequest.model_validate(payload)
        assert request.task_type == "cards" and request.reason.startswith("Retrieval insufficient")
        repo = store.repository(HandoffRepository)
        assert repo.pending() == []  # pausing is not a failed delivery
        assert repo.decision_stats() == []  # recorded once, when the hand-off completes

        done = graph.invoke(Command(resume="A colleague will call you back."), thread)
        assert done["human"] == "A colleague will call you back."
        assert done["answer"].startswith("I'm not confident")
        assert repo.decision_stats()[0]["transferred"] == 1
        assert repo.decision_stats()[0]["decisions"] == 1
    # the notification hook ran before the pause, and again when the node re-ran
    assert len(notified) == 2


def test_covered_question_does_not_pause() -> None:
    with Store("mem://") as store:
        graph = build_graph(store, [])
        out = graph.invoke(
            {"question": "my card has not arrived"}, {"configurable": {"thread_id": "t-2"}}
        )
    assert "__interrupt__" not in out and out["answer"].startswith("bot: ")


def test_outside_a_graph_the_request_is_kept_pending() -> None:
    with Store("mem://") as store:
        dispatcher = TransferDispatcher([LangGraphInterruptHook()], store=store)
        outcome = dispatcher.dispatch(TransferRequest(reason="test"))
        rows = store.repository(HandoffRepository).pending()
    assert outcome.pending and "must run inside a LangGraph node" in rows[0]["error"]


def test_config_langgraph_kind_builds_the_interrupt_hook() -> None:
    hooks = [{"type": "langgraph"}, {"type": "langgraph", "name": "pause"}]
    config = RouterConfig.model_validate({"store": "mem://", "hooks": hooks})
    with config.build_router() as router:
        assert router.transfer is not None
        hooks = router.transfer.hooks
    assert all(isinstance(h, LangGraphInterruptHook) for h in hooks)
    assert [h.name for h in hooks] == ["langgraph", "pause"]

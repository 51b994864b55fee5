"""The LangGraph adapter: a hand-off pauses the graph for a person, who resumes it."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from handoff_helpers import faq_store
from langchain_core.runnables import RunnableLambda
from webhook_server import webhook_receiver

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.integrations.langchain.handoff import HandoffResult, HandoffRunnable
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.config import RouterConfig
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.transfer import (
    CallableHook,
    TransferDispatcher,
    TransferRequest,
    WebhookHook,
)
from trustroute.router.trust.abstention import AbstentionPolicy

langgraph = pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver, MemorySaver  # noqa: E402
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
        task_type=lambda _: "cards",  # the same task type for every input
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
    compiled = graph.compile(checkpointer=InMemorySaver())
    compiled.rag = rag  # type: ignore[attr-defined]  # the test waits on its dispatcher
    return compiled


def test_handoff_interrupts_the_graph_and_resumes_with_the_answer() -> None:
    notified: list[str] = []
    with Store("mem://") as store:
        graph = build_graph(store, notified)
        thread = {"configurable": {"thread_id": "t-1"}}
        paused = graph.invoke({"question": "can I buy bitcoin with crypto"}, thread)
        assert "__interrupt__" in paused
        assert graph.rag.dispatcher.join(10)  # the notification, on the background worker
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
        assert graph.rag.close()
    # the notification hook ran once, before the pause, with the id the interrupt carried:
    # when the node re-ran on resume its row was already delivered, so it was not sent again
    assert notified == [request.request_id]


def test_covered_question_does_not_pause() -> None:
    with Store("mem://") as store:
        graph = build_graph(store, [])
        out = graph.invoke(
            {"question": "my card has not arrived"}, {"configurable": {"thread_id": "t-2"}}
        )
        assert graph.rag.close()
    assert "__interrupt__" not in out and out["answer"].startswith("bot: ")


OUTSIDE = "LangGraphInterruptHook must run inside a LangGraph node"


def test_outside_a_graph_the_request_is_kept_pending() -> None:
    with Store("mem://") as store:
        dispatcher = TransferDispatcher([LangGraphInterruptHook()], store=store)
        outcome = dispatcher.dispatch(TransferRequest(reason="test"))
        rows = store.repository(HandoffRepository).pending()
    assert outcome.pending and OUTSIDE in rows[0]["error"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_in_a_runnable_outside_a_graph_the_error_says_what_to_do(mode: str) -> None:
    # a LangChain runnable context without a graph: LangGraph's own error is a bare KeyError
    hook = LangGraphInterruptHook()
    request = TransferRequest(reason="test")

    async def acall(_: object) -> Any:
        return await hook.acall(request)

    step = RunnableLambda(lambda _: hook(request), afunc=acall)
    with pytest.raises(RuntimeError, match=OUTSIDE + ".*compiled with a checkpointer"):
        step.invoke(1) if mode == "sync" else asyncio.run(step.ainvoke(1))
    with Store("mem://") as store:
        dispatcher = TransferDispatcher([hook], store=store)
        outcome = RunnableLambda(lambda r: dispatcher.dispatch(r)).invoke(request)
        rows = store.repository(HandoffRepository).pending()
    assert outcome.pending and rows[0]["error"].startswith("RuntimeError: " + OUTSIDE)


def test_config_langgraph_kind_builds_the_interrupt_hook() -> None:
    hooks = [{"type": "langgraph"}, {"type": "langgraph", "name": "pause"}]
    config = RouterConfig.model_validate({"store": "mem://", "hooks": hooks})
    with config.build_router() as router:
        assert router.transfer is not None
        hooks = router.transfer.hooks
    assert all(isinstance(h, LangGraphInterruptHook) for h in hooks)
    assert [h.name for h in hooks] == ["langgraph", "pause"]


def rag_with_ticket(store: Store, ticket_url: str) -> HandoffRunnable:
    """A hand-off that pauses the graph and also opens a ticket through a real webhook."""
    return HandoffRunnable(
        faq_store(),
        RunnableLambda(lambda x: "bot: " + x["context"][:30]),
        confidence=RetrievalConfidence(score_threshold=0.4),
        hooks=[LangGraphInterruptHook(), WebhookHook(ticket_url, backoff_s=0)],
        store=store,
        task_type=lambda _: "cards",  # the same task type for every input
    )


def two_handoff_graph(rag: HandoffRunnable, mode: str) -> Any:
    """One node that hands over twice (two questions); the second pause comes on resume."""

    def respond(state: State) -> State:
        first = rag.invoke("can I buy bitcoin with crypto")
        second = rag.invoke("weather forecast tomorrow")
        return {"human": [first.human_response, second.human_response]}

    async def arespond(state: State) -> State:
        first = await rag.ainvoke("can I buy bitcoin with crypto")
        second = await rag.ainvoke("weather forecast tomorrow")
        return {"human": [first.human_response, second.human_response]}

    graph = StateGraph(State)
    graph.add_node("respond", respond if mode == "sync" else arespond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    return graph.compile(checkpointer=MemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hooks_that_fire_again_on_resume_send_the_same_request_id(mode: str) -> None:
    with webhook_receiver([200]) as desk, Store("mem://") as store:
        rag = rag_with_ticket(store, desk.url)
        graph = two_handoff_graph(rag, mode)

        def run(value: Any, thread: str) -> Any:
            config = {"configurable": {"thread_id": thread}}
            if mode == "sync":
                out = graph.invoke(value, config)
            else:
                out = asyncio.run(graph.ainvoke(value, config))
            assert rag.dispatcher is not None and rag.dispatcher.join(10)
            return out

        paused = [run({"question": "q"}, "t-1")]
        paused.append(run(Command(resume="first answer"), "t-1"))
        done = run(Command(resume="second answer"), "t-1")
        other = run({"question": "q"}, "t-2")  # another conversation: another hand-off
        assert rag.close()
    assert done["human"] == ["first answer", "second answer"]
    interrupted = [p["__interrupt__"][0].value["handoff"]["request_id"] for p in paused]
    ticketed = [r.headers["X-Trustroute-Request-Id"] for r in desk.received]
    first, second = interrupted
    # the node ran three times; each hand-off's ticket went out once, with the id of the
    # pause it belongs to: when the node re-ran, the same request id found its ticket
    # row delivered, so it was not sent again
    assert first != second
    assert ticketed[:2] == [first, second]
    assert [r.json()["request_id"] for r in desk.received[:2]] == ticketed[:2]
    assert len(ticketed) == 3  # and the other conversation's
    assert other["__interrupt__"][0].value["handoff"]["request_id"] not in (first, second)


def test_a_request_id_given_by_the_caller_is_kept() -> None:
    tickets: list[str] = []
    dispatcher = TransferDispatcher(
        [LangGraphInterruptHook(), lambda r: tickets.append(r.request_id)]
    )

    def respond(state: State) -> State:
        outcome = dispatcher.dispatch(TransferRequest(request_id="ticket-42", reason="test"))
        return {"human": outcome.responses["langgraph"]}

    graph = StateGraph(State)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    app = graph.compile(checkpointer=MemorySaver())
    thread = {"configurable": {"thread_id": "t-3"}}
    paused = app.invoke({"question": "q"}, thread)
    done = app.invoke(Command(resume="ok"), thread)
    assert dispatcher.close()
    assert paused["__interrupt__"][0].value["handoff"]["request_id"] == "ticket-42"
    assert done["human"] == "ok" and tickets == ["ticket-42", "ticket-42"]


def test_an_abstention_skips_the_langgraph_hook_and_says_so_at_construction(
        caplog: pytest.LogCaptureFixture) -> None:
    """The abstention's hand-off runs on the background worker, outside any graph: the
    LangGraph hook always failed there, its row stayed pending and every sweep tried it
    again with a WARNING; nothing said so when the router was built."""
    handed: list[str] = []
    hooks = TransferDispatcher([LangGraphInterruptHook(), CallableHook(
        lambda request: handed.append(request.task_type), name="desk")])
    with caplog.at_level("WARNING"):
        router = AgentRouter(["a", "b"], store="mem://", seed=0, transfer=hooks,
                             abstention=AbstentionPolicy(on_abstain="human"))
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "on_abstain: human" in warning and "langgraph cannot run" in warning
    with router:
        for agent_id in ("a", "b"):  # both always failed: weak_resonance fires
            for _ in range(10):
                router.record(agent_id=agent_id, task_type="t", success=False)
        routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                                agents={"a": RunnableLambda(lambda _: {"answer": "A"}),
                                        "b": RunnableLambda(lambda _: {"answer": "B"})})
        graph = StateGraph(State)
        graph.add_node("route", routed)
        graph.add_edge(START, "route")
        graph.add_edge("route", END)
        app = graph.compile(checkpointer=InMemorySaver())
        caplog.clear()
        with caplog.at_level("WARNING"):
            out = app.invoke({"question": "q"}, {"configurable": {"thread_id": "t-1"}})
            assert hooks.join(5)
        assert out["answer"] in ("A", "B") and "__interrupt__" not in out
        assert handed == ["t"]  # the desk got it; the LangGraph hook was not tried
        rows = router.store.repository(HandoffRepository).pending(status=None)
        assert [(row["hook"], row["status"]) for row in rows] == [("desk", "delivered")]
        assert caplog.records == []

"""HandoffRunnable with real LangChain objects and a deterministic embedder."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from cli_helpers import run
from handoff_helpers import ScoredRetriever, faq_store
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import ConfigurableField, RunnableGenerator, RunnableLambda
from langchain_core.vectorstores import VectorStore
from langchain_helpers import RunLog

from trustroute.integrations.langchain import fixed_task_type
from trustroute.integrations.langchain.handoff import (
    HandoffResult,
    HandoffRunnable,
    estimate_tokens,
)
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.config import RouterConfig
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher, TransferRequest

# the toy embedder's cosine scores sit lower than a sentence model's
CONFIDENCE = RetrievalConfidence(score_threshold=0.4)
COVERED = "my card has not arrived"
UNCOVERED = "can I buy bitcoin with crypto"


def echo_chain() -> Any:
    prompt = PromptTemplate.from_template("Q: {question}\nContext: {context}")
    return prompt | RunnableLambda(lambda p: "ANSWER<" + p.to_string() + ">")


def test_covered_question_is_answered_by_the_chain() -> None:
    fired: list[TransferRequest] = []
    with Store("mem://") as store:
        rag = HandoffRunnable(
            faq_store(), echo_chain(), confidence=CONFIDENCE, hooks=[fired.append], store=store
        )
        out = rag.invoke(COVERED)
        stats = store.repository(HandoffRepository).decision_stats()
        assert rag.close()
    assert isinstance(out, str) and out.startswith("ANSWER<Q: my card has not arrived")
    assert "Cards arrive within seven working days" in out
    assert fired == []
    assert stats == [
        {
            "task_type": "rag",
            "decisions": 1,
            "transferred": 0,
            "handoff_rate": 0.0,
            "mean_confidence": pytest.approx(stats[0]["mean_confidence"]),
        }
    ]


def test_uncovered_question_fires_the_hooks_and_returns_a_handoff() -> None:
    fired: list[TransferRequest] = []
    run_id = uuid.uuid4()
    with Store("mem://") as store:
        rag = HandoffRunnable(
            faq_store(),
            echo_chain(),
            confidence=CONFIDENCE,
            hooks=[CallableHook(fired.append, name="desk")],
            store=store,
            task_type=fixed_task_type("cards"),
        )
        out = rag.invoke({"question": UNCOVERED, "user": "u-17"}, {"run_id": run_id})
        # the caller got its answer at once; the hook runs on the background worker
        assert out.outcome is not None and out.outcome.queued == ("desk",)
        assert rag.dispatcher is not None and rag.dispatcher.join(10)
        pending = store.repository(HandoffRepository).pending()
        assert rag.close()
    assert isinstance(out, HandoffResult) and out.handed_off
    assert out.message.startswith("I'm not confident I can answer this correctly")
    assert out.reason.startswith("Retrieval insufficient (best score")
    assert out.confidence < CONFIDENCE.config.confidence_low_threshold
    assert pending == [] and len(fired) == 1
    req = fired[0]
    assert req is out.request
    assert req.input == {"question": UNCOVERED, "user": "u-17"}
    assert req.run_id == str(run_id) and req.task_type == "cards"
    assert req.diagnostics["max_score"] == pytest.approx(out.request.diagnostics["max_score"])
    assert req.metadata["query"] == UNCOVERED


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_an_answer_streams_as_the_chain_streams_it_and_a_handoff_is_one_chunk(
        mode: str) -> None:
    def said(inputs: Iterator[Any]) -> Iterator[str]:
        for _ in inputs:
            pass
        yield from ["Cards ", "arrive ", "soon."]

    async def asaid(inputs: AsyncIterator[Any]) -> AsyncIterator[str]:
        async for _ in inputs:
            pass
        for word in ["Cards ", "arrive ", "soon."]:
            yield word

    words = RunnableGenerator(said, asaid)  # an answer chain that streams word by word

    def chunks(rag: HandoffRunnable, question: str) -> list[Any]:
        if mode == "stream":
            return list(rag.stream(question))

        async def collect() -> list[Any]:
            return [c async for c in rag.astream(question)]
        return asyncio.run(collect())

    with Store("mem://") as store:
        rag = HandoffRunnable(faq_store(), words, confidence=CONFIDENCE, store=store)
        assert chunks(rag, COVERED) == ["Cards ", "arrive ", "soon."]  # as they come
        (handed,) = chunks(rag, UNCOVERED)
        assert isinstance(handed, HandoffResult)
        stats = store.repository(HandoffRepository).decision_stats()
    assert (stats[0]["decisions"], stats[0]["transferred"]) == (2, 1)


def test_configurable_fields_of_the_answer_chain_reach_it() -> None:
    model = FakeListChatModel(responses=["plain"]).configurable_fields(
        responses=ConfigurableField(id="style"))
    answer = RunnableLambda(lambda x: x["question"]) | model | StrOutputParser()
    with Store("mem://") as store:
        rag = HandoffRunnable(faq_store(), answer, confidence=CONFIDENCE, store=store)
        assert [spec.id for spec in rag.config_specs] == ["style"]
        formal = rag.with_config(configurable={"style": ["formal"]})
        assert (rag.invoke(COVERED), formal.invoke(COVERED)) == ("plain", "formal")


def test_handoff_rate_per_task_type_in_the_store_and_cli(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "router.yaml"
    config.write_text("store: surrealkv://db\nagents: [bot]\n", encoding="utf-8")
    with AgentRouter.from_config(config) as router:
        cards = HandoffRunnable(
            faq_store(), echo_chain(), confidence=CONFIDENCE, router=router,
            task_type=fixed_task_type("cards"),
        )
        topup = HandoffRunnable(
            faq_store(), echo_chain(), confidence=CONFIDENCE, router=router,
            task_type=fixed_task_type("top-up"),
        )
        for question in (COVERED, UNCOVERED, "what is the weather on mars", COVERED):
            cards.invoke(question)
        topup.invoke("how do I top up my account with a bank transfer")
        router.record(agent_id="bot", task_type="cards", success=True)
        # no hooks configured: the hand-offs are kept pending for a person, not lost
        assert len(router.transfer.pending()) == 2  # type: ignore[union-attr]
    result = run(capsys, "handoffs", "--config", str(config), "--stats", "--json")
    assert result.code == 0, result.err
    by_type = {r["task_type"]: r for r in result.json()}
    assert by_type["cards"]["decisions"] == 4 and by_type["cards"]["transferred"] == 2
    assert by_type["cards"]["handoff_rate"] == 0.5
    assert by_type["top-up"]["handoff_rate"] == 0.0
    table = run(capsys, "handoffs", "--config", str(config), "--stats")
    assert "cards" in table.out and "50%" in table.out
    profiles = run(capsys, "profiles", "--config", str(config))
    assert profiles.code == 0, profiles.err
    assert "hand-off rate by task type" in profiles.out and "50%" in profiles.out


def test_retriever_with_scores_in_metadata() -> None:
    store = faq_store()
    rag = HandoffRunnable(ScoredRetriever(store=store), echo_chain(), confidence=CONFIDENCE)
    assert isinstance(rag.invoke(COVERED), str)
    assert isinstance(rag.invoke(UNCOVERED), HandoffResult)
    unscored = HandoffRunnable(store.as_retriever(), echo_chain(), confidence=CONFIDENCE)
    with pytest.raises(ValueError, match="without relevance scores; pass the vector store"):
        unscored.invoke(COVERED)


def test_relevance_score_fn_maps_raw_scores() -> None:
    rag = HandoffRunnable(
        faq_store(), echo_chain(), confidence=CONFIDENCE, relevance_score_fn=lambda s: 1.0
    )
    assert isinstance(rag.invoke(UNCOVERED), str)  # every document now "fully relevant"


class UnscoredStore(VectorStore):
    """A vector store that defines no relevance function (its raw scores are distances)."""

    def add_texts(self, texts: Any, metadatas: Any = None, **kwargs: Any) -> list[str]:
        return []

    @classmethod
    def from_texts(cls, texts: Any, embedding: Any, metadatas: Any = None,
                   **kwargs: Any) -> UnscoredStore:
        return cls()

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return []

    def similarity_search_with_score(self, query: str, k: int = 4,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        return [(Document(page_content="Cards arrive within seven working days."), 3.0)]


def test_a_store_without_relevance_scores_needs_relevance_score_fn() -> None:
    rag = HandoffRunnable(UnscoredStore(), echo_chain(), confidence=CONFIDENCE)
    with pytest.raises(ValueError, match="UnscoredStore has no relevance-score function"):
        rag.invoke(COVERED)
    with pytest.raises(ValueError, match="pass relevance_score_fn="):
        asyncio.run(rag.ainvoke(COVERED))
    mapped = HandoffRunnable(UnscoredStore(), echo_chain(), confidence=CONFIDENCE,
                             relevance_score_fn=lambda distance: 1 / (1 + distance))
    out = asyncio.run(mapped.ainvoke(COVERED))
    assert isinstance(out, HandoffResult)
    assert out.request.diagnostics["max_score"] == pytest.approx(0.25)  # 1 / (1 + 3)
    assert isinstance(mapped.invoke(COVERED), HandoffResult)


def test_evidence_token_limit_applies() -> None:
    tight = RetrievalConfidence(score_threshold=0.4, max_evidence_tokens=5)
    out = HandoffRunnable(faq_store(), echo_chain(), confidence=tight).invoke(COVERED)
    assert isinstance(out, HandoffResult)
    assert "token_overflow" in out.request.diagnostics["insufficient_reasons"]
    assert estimate_tokens("abcdefgh") == 2 and estimate_tokens("转人工") == 3


def test_config_flows_to_the_answer_chain_as_a_child_run() -> None:
    log = RunLog()
    rag = HandoffRunnable(faq_store(), echo_chain(), confidence=CONFIDENCE, name="faq-bot")
    rag.invoke(COVERED, {"callbacks": [log]})
    (root,) = log.named("faq-bot")
    assert root["parent_run_id"] is None
    assert any(run["parent_run_id"] == root["run_id"] for run in log.starts)


def test_async_paths() -> None:
    fired: list[str] = []

    async def hook(request: TransferRequest) -> None:
        await asyncio.sleep(0)
        fired.append(request.reason)

    async def main() -> tuple[Any, Any]:
        with Store("mem://") as store:
            rag = HandoffRunnable(
                faq_store(), echo_chain(), confidence=CONFIDENCE, hooks=[hook], store=store
            )
            answered = await rag.ainvoke(COVERED)
            handed = await rag.ainvoke(UNCOVERED)
            assert store.repository(HandoffRepository).decision_stats()[0]["decisions"] == 2
            # the hook is delivered in the background (the default): wait for it
            assert rag.dispatcher is not None and rag.dispatcher.join(10)
            assert rag.close()
            return answered, handed

    answered, handed = asyncio.run(main())
    assert isinstance(answered, str) and isinstance(handed, HandoffResult)
    assert fired == [handed.reason]


def test_chinese_message_and_custom_message() -> None:
    zh = RetrievalConfidence(score_threshold=0.4, locale="zh")
    out = HandoffRunnable(faq_store(), echo_chain(), confidence=zh).invoke(UNCOVERED)
    assert isinstance(out, HandoffResult)
    assert out.message == "这个问题我无法可靠地回答，正在为您转接人工客服。"
    assert out.reason.startswith("检索结果不足")
    custom = HandoffRunnable(faq_store(), echo_chain(), confidence=CONFIDENCE, message="One moment")
    assert custom.invoke(UNCOVERED).message == "One moment"


def test_confidence_from_a_named_calibration_and_router_config() -> None:
    config = RouterConfig.model_validate(
        {
            "store": "mem://",
            "agents": ["bot"],
            "handoff": {"calibration": "faq", "message": "Passing you to a colleague."},
        }
    )
    with config.build_router() as router:
        RetrievalConfidence(score_threshold=0.42, locale="zh").save(router.store, "faq")
        rag = HandoffRunnable(faq_store(), echo_chain(), router=router)
        assert rag.confidence.config.score_threshold == 0.42 and rag.confidence.locale == "zh"
        assert rag.message == "Passing you to a colleague."
        by_name = HandoffRunnable(faq_store(), echo_chain(), confidence="faq", store=router.store)
        assert by_name.confidence.config.score_threshold == 0.42
    with pytest.raises(ValueError, match="names a calibration"):
        HandoffRunnable(faq_store(), echo_chain(), confidence="faq")


@pytest.mark.parametrize("score", [None, "high", True, [0.9]])
def test_a_documents_bad_score_is_named(score: Any) -> None:
    docs = [Document(page_content="a", metadata={"score": 0.9}),
            Document(page_content="b", metadata={"score": score})]
    rag = HandoffRunnable(RunnableLambda(lambda q: docs), echo_chain(), confidence=CONFIDENCE)
    with pytest.raises(ValueError, match=r"document 1\.metadata\.score.* must be a number"):
        rag.invoke(COVERED)


def test_hooks_named_like_the_routers_are_refused() -> None:
    desk = TransferDispatcher([CallableHook(print, name="desk")])
    with AgentRouter(["bot"], store="mem://", transfer=desk) as router:
        with pytest.raises(ValueError, match="'desk' is also the name of a hook of the rou"):
            HandoffRunnable(faq_store(), echo_chain(), router=router,
                            hooks=[CallableHook(print, name="desk")])
        HandoffRunnable(faq_store(), echo_chain(), router=router,
                        hooks=[CallableHook(print, name="billing")]).close()


def test_its_own_hooks_resend_what_a_crashed_worker_left_pending() -> None:
    got: list[TransferRequest] = []
    left = TransferRequest(reason="left by a crashed worker", task_type="billing")
    desk = TransferDispatcher([CallableHook(print, name="desk")],
                              settings=HandoffSection(dispatch_retry_interval_s=0.2))
    with AgentRouter(["bot"], store="mem://", transfer=desk) as router:
        router.store.repository(HandoffRepository).save_pending(
            left.payload(), hook="rag", error="the process died")
        rag = HandoffRunnable(faq_store(), echo_chain(), router=router,
                              hooks=[CallableHook(got.append, name="rag")])
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:  # no new hand-off needed
            time.sleep(0.05)
        rag.close()
    assert [r.request_id for r in got] == [left.request_id]


@pytest.mark.parametrize(
    ("bad", "error"),
    [({"text": "hi"}, ValueError), (42, TypeError)],
)
def test_bad_input(bad: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        HandoffRunnable(faq_store(), echo_chain(), confidence=CONFIDENCE).invoke(bad)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_text_output_composes_with_a_string_parser(mode: str) -> None:
    fired: list[TransferRequest] = []
    before = set(threading.enumerate())
    with HandoffRunnable(faq_store(), echo_chain(), confidence=CONFIDENCE,
                         hooks=[fired.append], handoff_output="text") as rag:
        chain = rag | StrOutputParser()

        def call(question: str) -> Any:
            if mode == "invoke":
                return chain.invoke(question)
            return asyncio.run(chain.ainvoke(question))

        assert call(UNCOVERED).startswith("I'm not confident I can answer this correctly")
        assert rag.dispatcher is not None and rag.dispatcher.join(10)
        assert len(fired) == 1  # the hand-off itself still happens
        assert call(COVERED).startswith("ANSWER<Q: my card has not arrived")
    # the with block closed the runnable: its delivery worker has stopped
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]
    with pytest.raises(ValueError, match="handoff_output must be 'result' or 'text'"):
        HandoffRunnable(faq_store(), echo_chain(), handoff_output="message")


class PlainRetriever(BaseRetriever):
    """A retriever whose documents carry no score at all."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content="Cards arrive within seven working days.")]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_retriever_without_scores_is_told_how_to_provide_them(mode: str) -> None:
    def call(source: Any) -> Any:
        rag = HandoffRunnable(source, echo_chain(), confidence=CONFIDENCE)
        return rag.invoke(COVERED) if mode == "invoke" else asyncio.run(rag.ainvoke(COVERED))

    with pytest.raises(ValueError, match=r"pass the vector store itself \(retriever\.vectorstore"):
        call(faq_store().as_retriever())
    with pytest.raises(ValueError, match=r"PlainRetriever returned document 0 without a relevance"
                                         r" score.*score_key=.*or pass a vector store"):
        call(PlainRetriever())

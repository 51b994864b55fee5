"""HandoffRunnable: retrieve, judge the retrieval, then answer or hand over to a person.

```python
rag = HandoffRunnable(vectorstore, prompt | llm, confidence=RetrievalConfidence(...),
                      hooks=[WebhookHook(url)], router=router,
                      task_type=fixed_task_type("billing"))
out = rag.invoke("Can I pay my card bill in Bitcoin?")
if isinstance(out, HandoffResult): ...   # handed over; out.message is what the user sees
```

Retrieval needs relevance scores, every decision (answered or handed over) goes to the
store's hand-off log with its task type, and sync and async paths are symmetric: see
docs/handoff.md ("LangChain: HandoffRunnable") for each option.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, patch_config
from langchain_core.runnables.utils import ConfigurableFieldSpec
from pydantic import BaseModel, ConfigDict, create_model

from trustroute.integrations.langchain.checks import as_runnable, distinct_hooks, retrieval_source
from trustroute.integrations.langchain.handoff_result import HandoffResult
from trustroute.integrations.langchain.retrieval import ScoredRetrieval
from trustroute.integrations.langchain.task import (
    TaskTypeSpec,
    check_task_type,
    fixed_task_type,
    resolve_task_type,
    text_field,
    with_task_type_key,
)
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.confidence import ConfidenceResult, RetrievalConfidence
from trustroute.router.handoff.messages import message
from trustroute.router.handoff.transfer import TransferDispatcher, TransferOutcome, TransferRequest
from trustroute.router.handoff.transfer.hook import hook_name

if TYPE_CHECKING:
    from trustroute.profiles.store import Store
    from trustroute.router.router import AgentRouter

log = logging.getLogger(__name__)

QUERY_KEYS = ("question", "query", "input")
DEFAULT_TASK_TYPE = fixed_task_type("rag")
HANDOFF_OUTPUTS = ("result", "text")


def estimate_tokens(text: str) -> int:
    """Rough token count without a tokenizer: ~4 characters per token for Latin text,
    one per CJK character (where a character is often a whole word)."""
    cjk = sum(1 for ch in text if "\u3000" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af")
    return cjk + math.ceil((len(text) - cjk) / 4)


@lru_cache(maxsize=128)
def question_schema(key: str, name: str) -> type[BaseModel]:
    """A dict schema with the question under ``key`` (a required string), other keys
    allowed."""
    about = "the question: answered from the retrieved documents, or handed to a person"
    return create_model(name, __config__=ConfigDict(extra="allow"),
                        **text_field(key, about, "handoff_question"))


def _query_of(input_: Any, key: str | None) -> str:
    if isinstance(input_, str):
        return input_
    if isinstance(input_, BaseMessage):
        return str(input_.content)
    if isinstance(input_, Mapping):
        keys = (key,) if key else QUERY_KEYS
        for k in keys:
            if isinstance(input_.get(k), str):
                return str(input_[k])
        raise ValueError(f"HandoffRunnable input needs a text under one of {', '.join(keys)}")
    raise TypeError(
        f"HandoffRunnable input must be a string or a dict, got {type(input_).__name__}"
    )


class HandoffRunnable(Runnable[Any, Any]):
    """Answer from retrieved documents when retrieval supports it; else hand over."""

    def __init__(
        self,
        retriever_or_vectorstore: Any,
        answer_chain: Runnable[Any, Any] | Callable[[Any], Any],
        *,
        confidence: RetrievalConfidence | Mapping[str, Any] | str | None = None,
        hooks: Sequence[Any] | TransferDispatcher | None = None,
        router: AgentRouter | None = None,
        store: Store | None = None,
        task_type: TaskTypeSpec = DEFAULT_TASK_TYPE,
        k: int = 4,
        search_kwargs: Mapping[str, Any] | None = None,
        score_key: str | None = None,
        relevance_score_fn: Callable[[float], float] | None = None,
        token_counter: Callable[[str], int] = estimate_tokens,
        input_key: str | None = None,
        message: str | None = None,
        name: str | None = None,
        handoff_output: Literal["result", "text"] = "result",
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if handoff_output not in HANDOFF_OUTPUTS:
            raise ValueError(f"handoff_output must be 'result' or 'text', got {handoff_output!r}")
        self.task_type = check_task_type(task_type)
        self.source = retrieval_source(retriever_or_vectorstore)
        self.answer_chain = as_runnable(answer_chain, "answer_chain")
        self.store = store if store is not None else (router.store if router else None)
        if isinstance(confidence, str):  # a calibration saved in the store
            if self.store is None:
                raise ValueError(
                    f"confidence={confidence!r} names a calibration; pass store= or router="
                )
            confidence = RetrievalConfidence.load(self.store, confidence)
        elif confidence is None and router is not None and router.transfer is not None:
            confidence = RetrievalConfidence.from_section(router.transfer.settings, router.store)
        if not isinstance(confidence, RetrievalConfidence):  # a mapping, or None: defaults
            confidence = RetrievalConfidence(confidence)
        self.confidence = confidence
        self.owns_dispatcher = False  # True when built here from hooks=: close() stops it
        if isinstance(hooks, TransferDispatcher):
            self.dispatcher: TransferDispatcher | None = hooks
        elif hooks:  # delivered as the router's handoff: section says (delivery, retries)
            shared = router.transfer if router else None
            own = distinct_hooks(list(hooks), shared.hooks if shared else [])
            self.dispatcher = TransferDispatcher(own, settings=shared.settings if shared else None)
            if self.store is not None:  # and sweeps what a crashed worker left pending
                self.dispatcher.bind_store(self.store)
            self.owns_dispatcher = True
        else:  # None: the HandoffResult goes back to the caller, who is the hand-off
            self.dispatcher = router.transfer if router else None
        self.k = k
        self.search_kwargs = dict(search_kwargs or {})
        self.score_key = score_key
        self.relevance_score_fn = relevance_score_fn
        self.token_counter = token_counter
        self.input_key = input_key
        self.message = message or (
            router.transfer.settings.message if router and router.transfer else None
        )
        self.name = name or "HandoffRunnable"
        self.handoff_output = handoff_output

    def __repr__(self) -> str:
        return (f"HandoffRunnable(name={self.name!r}, task_type={self.task_type!r}, "
                f"k={self.k}, handoff_output={self.handoff_output!r})")

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The answer chain's configurable fields (so ``configurable`` reaches it)."""
        return self.answer_chain.config_specs

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        """A dict with the question (under ``input_key``, else ``question``) and, when
        ``task_type`` names a key, the task type, both required strings; other keys
        reach the answer chain. So ``as_tool()`` has arguments; a plain string input
        works as before."""
        key, name = self.input_key or "question", self.get_name("Input")
        schema = question_schema(key, name)
        if isinstance(self.task_type, str) and self.task_type != key:
            return with_task_type_key(schema, self.task_type, name)
        return schema

    def close(self, timeout_s: float | None = None) -> bool:
        """Finish the background deliveries of the hooks given as ``hooks=`` (at most
        ``timeout_s``; undelivered hand-offs stay pending in the store). A dispatcher passed
        in, or the router's, is its owner's to close. True when everything queued was tried."""
        if not self.owns_dispatcher or self.dispatcher is None:
            return True
        return self.dispatcher.close(timeout_s)

    def __enter__(self) -> HandoffRunnable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- retrieval -------------------------------------------------------------------
    def _retrieval(self) -> ScoredRetrieval:
        return ScoredRetrieval(self.source, self.k, self.search_kwargs, self.score_key,
                               self.relevance_score_fn)

    # -- the decision ----------------------------------------------------------------
    def _decide(
        self,
        input_: Any,
        query: str,
        task_type: str,
        docs: list[Document],
        scores: list[float],
        run_id: UUID,
    ) -> tuple[ConfidenceResult, TransferRequest | None]:
        """The verdict on the retrieval, and the hand-off request when it says transfer."""
        tokens = sum(self.token_counter(d.page_content) for d in docs)
        result = self.confidence.evaluate(scores, evidence_tokens=tokens if docs else None)
        if not result.should_transfer:
            return result, None
        return result, TransferRequest.from_result(
            result,
            input=input_,
            run_id=run_id,
            task_type=task_type,
            metadata={"query": query, "runnable": self.name},
        )

    def _chain_input(
        self, input_: Any, query: str, docs: list[Document], result: ConfidenceResult
    ) -> dict[str, Any]:
        base = dict(input_) if isinstance(input_, Mapping) else {}
        return {
            **base,
            "question": query,
            "context": "\n\n".join(d.page_content for d in docs),
            "documents": docs,
            "confidence": result.confidence,
        }

    def _handoff_result(
        self,
        request: TransferRequest,
        result: ConfidenceResult,
        docs: list[Document],
        outcome: TransferOutcome | None,
    ) -> HandoffResult | str:
        """The hand-off as returned: the ``HandoffResult``, or its message with
        ``handoff_output="text"``."""
        human = None
        if outcome is not None and self.dispatcher is not None:
            hooks = {hook_name(h): h for h in self.dispatcher.hooks}
            for name, response in outcome.responses.items():
                if getattr(hooks.get(name), "returns_human_response", False):
                    human = response
        handed = HandoffResult(
            message=self.message or message("handoff_message", self.confidence.locale),
            reason=request.reason,
            confidence=result.confidence,
            request=request,
            documents=docs,
            outcome=outcome,
            human_response=human,
        )
        return handed.message if self.handoff_output == "text" else handed

    def _record(
        self,
        task_type: str,
        result: ConfidenceResult,
        run_id: UUID,
        request: TransferRequest | None,
    ) -> None:
        if self.store is None:
            return
        try:
            self.store.repository(HandoffRepository).record_decision(
                task_type=task_type,
                transferred=result.should_transfer,
                confidence=result.confidence,
                insufficient=result.is_retrieval_insufficient,
                reason=result.transfer_reason,
                source=self.name or "HandoffRunnable",
                run_id=str(run_id),
                request_id=None if request is None else request.request_id,
            )
        except Exception:  # the answer or hand-off itself must not fail on the log
            log.exception("could not record the hand-off decision for task type %s", task_type)

    # -- invoke and stream ------------------------------------------------------------
    def _run(self, input_: Any, run_manager: CallbackManagerForChainRun,
             config: RunnableConfig, answer: Callable[[Any, RunnableConfig], Any]
             ) -> tuple[bool, Any]:
        """Retrieve and judge; then (True, ``answer(chain input, child config)``), or
        (False, the hand-off) after dispatching it."""
        query = _query_of(input_, self.input_key)
        task_type = resolve_task_type(self.task_type, input_)
        child = patch_config(config, callbacks=run_manager.get_child())
        docs, scores = self._retrieval().retrieve(query, child)
        result, request = self._decide(input_, query, task_type, docs, scores, run_manager.run_id)
        if request is None:
            self._record(task_type, result, run_manager.run_id, None)
            return True, answer(self._chain_input(input_, query, docs, result), child)
        outcome = self.dispatcher.dispatch(request) if self.dispatcher else None
        request = outcome.request if outcome else request  # its id as the hooks saw it
        self._record(task_type, result, run_manager.run_id, request)
        return False, self._handoff_result(request, result, docs, outcome)

    async def _arun(self, input_: Any, run_manager: AsyncCallbackManagerForChainRun,
                    config: RunnableConfig, answer: Callable[[Any, RunnableConfig], Any]
                    ) -> tuple[bool, Any]:
        """Async ``_run``: async retrieval and hooks, store writes off the loop."""
        query = _query_of(input_, self.input_key)
        task_type = resolve_task_type(self.task_type, input_)
        child = patch_config(config, callbacks=run_manager.get_child())
        docs, scores = await self._retrieval().aretrieve(query, child)
        result, request = self._decide(input_, query, task_type, docs, scores, run_manager.run_id)
        if request is None:
            await asyncio.to_thread(self._record, task_type, result, run_manager.run_id, None)
            return True, answer(self._chain_input(input_, query, docs, result), child)
        outcome = await self.dispatcher.adispatch(request) if self.dispatcher else None
        request = outcome.request if outcome else request  # its id as the hooks saw it
        await asyncio.to_thread(self._record, task_type, result, run_manager.run_id, request)
        return False, self._handoff_result(request, result, docs, outcome)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Retrieve, evaluate, then answer with the chain or hand over (HandoffResult)."""
        return self._call_with_config(self._invoke, input, config, **kwargs)

    def _invoke(self, input_: Any, run_manager: CallbackManagerForChainRun,
                config: RunnableConfig, **kwargs: Any) -> Any:
        return self._run(input_, run_manager, config,
                         lambda x, c: self.answer_chain.invoke(x, c, **kwargs))[1]

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Async ``invoke``."""
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    async def _ainvoke(self, input_: Any, run_manager: AsyncCallbackManagerForChainRun,
                       config: RunnableConfig, **kwargs: Any) -> Any:
        answered, out = await self._arun(input_, run_manager, config,
                                         lambda x, c: self.answer_chain.ainvoke(x, c, **kwargs))
        return await out if answered else out

    def stream(self, input: Any, config: RunnableConfig | None = None,
               **kwargs: Any) -> Iterator[Any]:
        """The answer chain's chunks as it streams them, or the hand-off as one chunk."""
        yield from self._transform_stream_with_config(iter([input]), self._stream, config,
                                                      **kwargs)

    def _stream(self, inputs: Iterator[Any], run_manager: CallbackManagerForChainRun,
                config: RunnableConfig, **kwargs: Any) -> Iterator[Any]:
        answered, out = self._run(next(inputs), run_manager, config,
                                  lambda x, c: self.answer_chain.stream(x, c, **kwargs))
        yield from out if answered else [out]

    async def astream(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> AsyncIterator[Any]:
        """Async ``stream``."""
        async for chunk in self._atransform_stream_with_config(
                _one(input), self._astream, config, **kwargs):
            yield chunk

    async def _astream(self, inputs: AsyncIterator[Any],
                       run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig,
                       **kwargs: Any) -> AsyncIterator[Any]:
        answered, out = await self._arun(await anext(inputs), run_manager, config,
                                         lambda x, c: self.answer_chain.astream(x, c, **kwargs))
        if not answered:
            yield out
            return
        async for chunk in out:
            yield chunk


async def _one(value: Any) -> AsyncIterator[Any]:
    yield value

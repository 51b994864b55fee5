"""Retrieval with a relevance score per document, as ``HandoffRunnable`` judges it: a
vector store searched with relevance scores, or a retriever whose documents carry one
in their metadata (docs/handoff.md, "LangChain: HandoffRunnable")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import InMemoryVectorStore

from trustroute.router.handoff.inputs import SCORE_KEYS, as_number

Scored = tuple[list[Document], list[float]]


@dataclass(frozen=True, slots=True)
class ScoredRetrieval:
    """Searches ``source`` (a vector store or a retriever) for ``k`` documents and their
    relevance scores in [0, 1]."""

    source: Any
    k: int
    search_kwargs: Mapping[str, Any]
    score_key: str | None
    relevance_score_fn: Callable[[float], float] | None

    def _search(self, asynchronous: bool) -> Callable[..., Any] | None:
        """The vector store method giving (document, score) pairs, None for a retriever.

        Relevance scores, or raw scores mapped by ``relevance_score_fn``. An
        ``InMemoryVectorStore`` defines no relevance function, but its raw scores are
        cosine similarities, which are used as they are.
        """
        if not callable(getattr(self.source, "similarity_search_with_relevance_scores", None)):
            return None
        raw = self.relevance_score_fn is not None or isinstance(self.source, InMemoryVectorStore)
        name = "similarity_search_with_score" if raw else "similarity_search_with_relevance_scores"
        return getattr(self.source, "a" + name if asynchronous else name)

    def _from_pairs(self, pairs: Sequence[tuple[Document, float]]) -> Scored:
        fn = self.relevance_score_fn or float
        return [d for d, _ in pairs], [float(fn(s)) for _, s in pairs]

    def _scored(self, docs: Sequence[Document]) -> Scored:
        """A retriever's documents, each with the relevance score in its metadata."""
        return list(docs), [self._score(d, i) for i, d in enumerate(docs)]

    def _score(self, doc: Document, index: int) -> float:
        keys = (self.score_key,) if self.score_key else SCORE_KEYS
        for key in keys:
            if key in doc.metadata:  # checked as evaluate checks scores
                return as_number(doc.metadata[key], f"document {index}.metadata.{key}")
        # no relevance score: say what to pass instead
        name, store = type(self.source).__name__, getattr(self.source, "vectorstore", None)
        if store is not None:  # vectorstore.as_retriever(): the store itself has the scores
            raise ValueError(
                f"{name} over {type(store).__name__} returns documents without relevance "
                "scores; pass the vector store itself (retriever.vectorstore, with k= and "
                "search_kwargs=), which HandoffRunnable searches with relevance scores"
            )
        raise ValueError(
            f"{name} returned document {index} without a relevance score in its metadata "
            f"(looked for {', '.join(keys)}). HandoffRunnable needs one per document: use a "
            "retriever that writes it into each document's metadata (rerankers write "
            "'relevance_score'; name another key with score_key=), or pass a vector store "
            "instead of a retriever (searched with relevance scores)"
        )

    def _no_relevance(self) -> ValueError:
        return ValueError(
            f"{type(self.source).__name__} has no relevance-score function; pass "
            "relevance_score_fn= to map its similarity_search_with_score scores to [0, 1]"
        )

    def retrieve(self, query: str, config: RunnableConfig) -> Scored:
        """The documents for ``query`` and their relevance scores."""
        if (search := self._search(asynchronous=False)) is None:
            return self._scored(self.source.invoke(query, config))
        try:
            return self._from_pairs(search(query, k=self.k, **self.search_kwargs))
        except NotImplementedError:
            raise self._no_relevance() from None

    async def aretrieve(self, query: str, config: RunnableConfig) -> Scored:
        """Async ``retrieve``."""
        if (search := self._search(asynchronous=True)) is None:
            return self._scored(await self.source.ainvoke(query, config))
        try:
            return self._from_pairs(await search(query, k=self.k, **self.search_kwargs))
        except NotImplementedError:
            raise self._no_relevance() from None

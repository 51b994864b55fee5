"""A small deterministic embedder and a knowledge base for hand-off tests (no model)."""

from __future__ import annotations

import math
import re
import zlib
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

FAQ = [
    "How do I activate my new card? Open the app and tap activate card.",
    "My card has not arrived yet. Cards arrive within seven working days.",
    "How do I top up my account with a bank transfer?",
    "Why was my card payment declined at the shop?",
    "How can I change my PIN number at a cash machine?",
]


class WordHashEmbeddings(Embeddings):
    """Bag of words hashed into 256 dimensions, L2-normalised: texts sharing words are
    close, texts sharing none have cosine 0. Deterministic across runs and machines."""

    dims = 256

    def vector(self, text: str) -> list[float]:
        """The embedding of one text."""
        vec = [0.0] * self.dims
        for word in re.findall(r"[a-z]+", text.lower()):
            vec[zlib.crc32(word.encode()) % self.dims] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vector(text)


def faq_store() -> InMemoryVectorStore:
    """The FAQ in an in-memory vector store (cosine similarity)."""
    store = InMemoryVectorStore(WordHashEmbeddings())
    store.add_texts(FAQ)
    return store


class ScoredRetriever(BaseRetriever):
    """A retriever that puts each document's similarity in ``metadata["score"]``."""

    store: Any
    k: int = 3

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        pairs = self.store.similarity_search_with_score(query, k=self.k)
        return [
            Document(page_content=d.page_content, metadata={**d.metadata, "score": s})
            for d, s in pairs
        ]

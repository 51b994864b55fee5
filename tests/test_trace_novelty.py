"""Novelty against the local vector cache, with real LangChain Embeddings objects."""

from __future__ import annotations

import asyncio
import math

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from trustroute.router.trace import NoveltyCache, ReasoningTrace, evaluate_value, novelty


class AxisEmbeddings(Embeddings):
    """Each keyword is an axis: texts mentioning it point that way (exact cosines)."""

    AXES = ("alpha", "beta", "gamma")

    def embed_query(self, text: str) -> list[float]:
        return [float(word in text) for word in self.AXES]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def about(objective: str) -> ReasoningTrace:
    return ReasoningTrace(objective=objective, steps=[{"type": "thought", "content": "x"},
                                                      {"type": "observation"}],
                          outcome={"success": True})


def test_no_embedder_or_empty_cache_is_neutral() -> None:
    cache = NoveltyCache()
    assert novelty(about("alpha"), None, cache) == 0.5
    assert len(cache) == 0
    assert novelty(about("alpha"), AxisEmbeddings(), cache) == 0.5  # empty cache
    assert len(cache) == 1


def test_novelty_is_one_minus_max_cosine() -> None:
    cache, emb = NoveltyCache(), AxisEmbeddings()
    novelty(about("alpha"), emb, cache)
    assert novelty(about("alpha again"), emb, cache) == pytest.approx(0.0, abs=1e-6)
    assert novelty(about("beta"), emb, cache) == pytest.approx(1.0)
    # alpha+beta vs the closest of {alpha, beta}: cos 45° -> 1 - 0.7071
    assert novelty(about("alpha beta"), emb, cache) == pytest.approx(1 - math.sqrt(0.5))
    assert novelty(about("gamma"), emb, cache) == pytest.approx(1.0)


def test_novelty_changes_the_value_by_its_weight() -> None:
    cache, emb = NoveltyCache(), AxisEmbeddings()
    first = evaluate_value(about("alpha"), embedder=emb, cache=cache)
    repeat = evaluate_value(about("alpha"), embedder=emb, cache=cache)
    fresh = evaluate_value(about("beta"), embedder=emb, cache=cache)
    assert first - repeat == pytest.approx(0.5 * 0.35, abs=1e-6)  # N 0.5 -> 0
    assert fresh - first == pytest.approx(0.5 * 0.35, abs=1e-6)  # N 0.5 -> 1


def test_ttl_eviction() -> None:
    now = [0.0]
    cache = NoveltyCache(ttl_seconds=10, clock=lambda: now[0])
    cache.add([1.0, 0.0])
    now[0] = 5.0
    cache.add([0.0, 1.0])
    assert len(cache) == 2
    now[0] = 10.5  # the first vector expired
    assert len(cache) == 1
    assert cache.max_similarity([1.0, 0.0]) == pytest.approx(0.0)
    now[0] = 16.0
    assert len(cache) == 0 and cache.max_similarity([1.0, 0.0]) is None
    assert cache.observe([1.0, 0.0]) == 0.5  # empty again: neutral


def test_size_eviction_drops_the_oldest() -> None:
    cache = NoveltyCache(max_size=2, ttl_seconds=None)
    cache.add([1.0, 0.0, 0.0])
    cache.add([0.0, 1.0, 0.0])
    cache.add([0.0, 0.0, 1.0])
    assert len(cache) == 2
    assert cache.max_similarity([1.0, 0.0, 0.0]) == pytest.approx(0.0)  # evicted
    assert cache.max_similarity([0.0, 1.0, 0.0]) == pytest.approx(1.0)


def test_thousand_vectors_brute_force_with_langchain_fake_embeddings() -> None:
    emb = DeterministicFakeEmbedding(size=384)
    cache = NoveltyCache()
    for i in range(1100):
        cache.add(emb.embed_query(f"trace {i}"))
    assert len(cache) == 1000
    assert cache.max_similarity(emb.embed_query("trace 1099")) == pytest.approx(1.0, abs=1e-5)
    assert cache.max_similarity(emb.embed_query("trace 0")) < 0.5  # evicted


def test_bad_vectors_and_settings_are_clear_errors() -> None:
    cache = NoveltyCache()
    cache.add([1.0, 2.0])
    with pytest.raises(ValueError, match=r"3 dimensions.*2-dimensional"):
        cache.add([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite"):
        cache.add([float("nan"), 1.0])
    with pytest.raises(ValueError, match="max_size"):
        NoveltyCache(max_size=0)
    with pytest.raises(ValueError, match="ttl_seconds"):
        NoveltyCache(ttl_seconds=-1)
    cache.clear()
    cache.add([1.0, 2.0, 3.0])  # a cleared cache accepts a new dimension
    assert cache.dimension == 3


def test_async_novelty_uses_aembed_query() -> None:
    from trustroute.router.trace import aevaluate_value

    cache, emb = NoveltyCache(), AxisEmbeddings()

    async def main() -> tuple[float, float]:
        a = await aevaluate_value(about("alpha"), embedder=emb, cache=cache)
        b = await aevaluate_value(about("alpha"), embedder=emb, cache=cache)
        return a, b

    a, b = asyncio.run(main())
    assert a - b == pytest.approx(0.5 * 0.35, abs=1e-6)

"""Novelty: how unlike recent traces this one is, by cosine similarity of embeddings.

``NoveltyCache`` keeps the most recent trace embeddings (at most ``max_size``, 1,000 by
default, each for ``ttl_seconds``) in one preallocated numpy matrix used as a ring
buffer: a lookup is one matrix-vector product over unit vectors, which at this size
costs far less than computing the embedding itself, so no approximate index is needed.
Expired entries are ignored at once and their slots reused. Any object with
``embed_query(text) -> list[float]`` (every LangChain ``Embeddings``) is an embedder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from trustroute.router.trace.model import ReasoningTrace

NEUTRAL_NOVELTY = 0.5
DEFAULT_MAX_SIZE = 1000
DEFAULT_TTL_SECONDS = 7 * 24 * 3600.0  # the profile math's 7-day recency time constant
MAX_EMBED_CHARS = 8000  # bounds embedding cost; the objective and early steps come first


@runtime_checkable
class Embedder(Protocol):
    """The one method novelty needs from an embedding model."""

    def embed_query(self, text: str) -> list[float]:
        """Embed one text."""
        ...


def trace_text(trace: ReasoningTrace) -> str:
    """The text embedded for a trace: objective, then each step's kind, tool and content."""
    parts = [trace.objective]
    for step in trace.steps:
        tool = f" [{step.tool}]" if step.tool else ""
        parts.append(f"{step.type}{tool}: {step.content}")
    return "\n".join(parts)[:MAX_EMBED_CHARS]


class NoveltyCache:
    """Recent unit vectors for brute-force cosine search, with TTL and size eviction."""

    def __init__(self, max_size: int = DEFAULT_MAX_SIZE,
                 ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"max_size must be a positive integer, got {max_size!r}")
        if ttl_seconds is not None and not (ttl_seconds > 0 and np.isfinite(ttl_seconds)):
            raise ValueError(f"ttl_seconds must be a positive number or None, got {ttl_seconds!r}")
        self.max_size = max_size
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._vectors: np.ndarray | None = None  # (max_size, dim) float32, allocated lazily
        self._added = np.full(max_size, -np.inf)
        self._next = 0

    @property
    def dimension(self) -> int | None:
        """Embedding dimension, fixed by the first vector added (None while empty)."""
        return None if self._vectors is None else int(self._vectors.shape[1])

    def _live(self, now: float) -> np.ndarray:
        if self.ttl_seconds is None:
            return np.isfinite(self._added)
        return self._added > now - self.ttl_seconds

    def __len__(self) -> int:
        with self._lock:
            return int(self._live(self._clock()).sum())

    def clear(self) -> None:
        """Forget every vector (the dimension may change afterwards)."""
        with self._lock:
            self._vectors = None
            self._added.fill(-np.inf)
            self._next = 0

    def _unit(self, vector: Sequence[float] | np.ndarray) -> np.ndarray:
        v = np.asarray(vector, dtype=np.float32).ravel()
        if v.size == 0 or not np.all(np.isfinite(v)):
            raise ValueError("an embedding must be a non-empty vector of finite numbers")
        if self._vectors is not None and v.size != self._vectors.shape[1]:
            raise ValueError(f"embedding has {v.size} dimensions but the cache holds "
                             f"{self._vectors.shape[1]}-dimensional vectors; clear() it "
                             "before switching embedders")
        norm = float(np.linalg.norm(v))
        return v / norm if norm > 0 else v

    def _max_similarity(self, unit: np.ndarray, now: float) -> float | None:
        live = self._live(now)
        if self._vectors is None or not live.any():
            return None
        sims = self._vectors @ unit
        return float(np.max(sims[live]))

    def _add(self, unit: np.ndarray, now: float) -> None:
        if self._vectors is None:
            self._vectors = np.zeros((self.max_size, unit.size), dtype=np.float32)
        # Slots are written in ring order, so the slot after the newest holds the oldest
        # vector: never used, expired, or (when full) the one to evict.
        self._vectors[self._next] = unit
        self._added[self._next] = now
        self._next = (self._next + 1) % self.max_size

    def max_similarity(self, vector: Sequence[float] | np.ndarray) -> float | None:
        """Highest cosine similarity to a live vector, or None when there is none."""
        with self._lock:
            return self._max_similarity(self._unit(vector), self._clock())

    def add(self, vector: Sequence[float] | np.ndarray) -> None:
        """Remember a vector (evicting the oldest when full)."""
        with self._lock:
            self._add(self._unit(vector), self._clock())

    def observe(self, vector: Sequence[float] | np.ndarray) -> float:
        """Novelty of ``vector`` against the cache (0.5 when empty), then remember it.

        Novelty is ``1 - max cosine similarity`` clipped to [0, 1]: a near-duplicate of a
        recent trace scores about 0, anything orthogonal (or opposed) scores 1.
        """
        with self._lock:
            now = self._clock()
            unit = self._unit(vector)
            best = self._max_similarity(unit, now)
            self._add(unit, now)
        if best is None:
            return NEUTRAL_NOVELTY
        return min(1.0, max(0.0, 1.0 - best))


_shared_cache = NoveltyCache()


def shared_novelty_cache() -> NoveltyCache:
    """The process-wide cache used when an embedder is given without a cache."""
    return _shared_cache


def novelty(trace: ReasoningTrace, embedder: Embedder | None = None,
            cache: NoveltyCache | None = None) -> float:
    """N in [0, 1]: 0.5 without an embedder or with an empty cache (nothing to compare)."""
    if embedder is None:
        return NEUTRAL_NOVELTY
    vector = embedder.embed_query(trace_text(trace))
    return (cache if cache is not None else _shared_cache).observe(vector)


async def anovelty(trace: ReasoningTrace, embedder: Embedder | None = None,
                   cache: NoveltyCache | None = None) -> float:
    """Async ``novelty``: uses the embedder's ``aembed_query`` when it has one."""
    aembed = getattr(embedder, "aembed_query", None)
    if aembed is None:
        return novelty(trace, embedder, cache)
    vector = await aembed(trace_text(trace))
    return (cache if cache is not None else _shared_cache).observe(vector)

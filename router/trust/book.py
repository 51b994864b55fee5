"""TrustBook: the in-memory trust counts and scores that routing decisions read.

Like ``ProfileBook`` it keeps ``select()`` off the database: scores are computed when
counts change (on record, feedback, reload), so a decision only looks up a cached tier.
The book may hold only part of the stored pairs: the router loads the pairs whose tier
restricts routing when it opens, and any other pair before it first changes
(``missing`` / ``install``); a pair it does not hold counts as a new profile.
Pure: no I/O, no clock. The owner serialises writes (``TrustLayer`` changes the book and
its write buffers under one lock); reads never block.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from trustroute.profiles.trust_counts import Pair, TrustCounts, TrustDelta
from trustroute.router.trust.scores import DEFAULT_WEIGHTS, Tier, TrustScores, trust_scores


class TrustBook:
    """Map of (agent, task type) -> TrustCounts plus cached TrustScores."""

    def __init__(self, weights: tuple[float, float, float] = DEFAULT_WEIGHTS) -> None:
        self.weights = weights
        self.new_scores: TrustScores = trust_scores(TrustCounts(), weights)
        self._counts: dict[Pair, TrustCounts] = {}
        self._scores: dict[Pair, TrustScores] = {}
        self._loaded: set[Pair] = set()
        self.deprecated_pairs = 0  # pairs in the deprecated tier (0: the policy skips work)

    # -- reading -------------------------------------------------------------------
    def scores(self, agent_id: str, task_type: str) -> TrustScores:
        """A pair's scores (a never-seen pair has the new-profile scores)."""
        return self._scores.get((agent_id, task_type), self.new_scores)

    def counts(self, agent_id: str, task_type: str) -> TrustCounts:
        """A copy of a pair's counts (empty counts for a never-seen pair)."""
        found = self._counts.get((agent_id, task_type))
        return TrustCounts() if found is None else replace(found)

    def observations(self, agent_id: str, task_type: str) -> int:
        """How many observations back a pair's scores."""
        found = self._counts.get((agent_id, task_type))
        return 0 if found is None else found.observations

    def missing(self, pairs: Iterable[Pair]) -> list[Pair]:
        """The pairs whose stored counts have not been loaded yet (no duplicates)."""
        return list(dict.fromkeys(p for p in pairs if p not in self._loaded))

    def pairs(self) -> list[Pair]:
        """Every known pair, sorted."""
        return sorted(self._counts)

    # -- writing -------------------------------------------------------------------
    def update(self, delta: TrustDelta) -> tuple[TrustScores, TrustScores]:
        """Apply ``delta`` to its pair's counts; returns the (before, after) scores."""
        counts = self._counts.setdefault(delta.pair, TrustCounts())
        before = self.scores(*delta.pair)
        delta.apply_to(counts)
        return before, self._set_scores(delta.pair, counts)

    def replace(self, counts: dict[Pair, TrustCounts]) -> None:
        """Swap in freshly loaded counts (the book takes ownership of the objects); only
        these pairs count as loaded."""
        self._counts, self._scores, self.deprecated_pairs = {}, {}, 0
        self._loaded = set()
        for key, c in counts.items():
            self.install(key, c)

    def install(self, pair: Pair, counts: TrustCounts) -> TrustScores:
        """Put a pair's loaded counts in place (replacing what was held) and mark it
        loaded; returns its scores."""
        self._counts[pair] = counts
        self._loaded.add(pair)
        return self._set_scores(pair, counts)

    def _set_scores(self, key: Pair, counts: TrustCounts) -> TrustScores:
        scores = trust_scores(counts, self.weights)
        old = self._scores.get(key)
        self.deprecated_pairs += ((scores.tier is Tier.DEPRECATED)
                                  - (old is not None and old.tier is Tier.DEPRECATED))
        self._scores[key] = scores
        return scores

"""TrustBook: the in-memory trust counts and scores that routing decisions read.

Like ``ProfileBook`` it keeps ``select()`` off the database: scores are computed when
counts change (a folded log row, the lifecycle's marks), so a decision only looks up a
cached tier. It holds every pair the log mentions; a pair it does not hold counts as a
new profile. Pure: no I/O, no clock. The owner serialises writes (``TrustLayer``
changes the book under one lock); reads never block.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from trustroute.profiles.trust_counts import Pair, TrustCounts, TrustDelta
from trustroute.router.trust.scores import DEFAULT_WEIGHTS, Tier, TrustScores, trust_scores


class TrustBook:
    """Map of (agent, task type) -> TrustCounts plus cached TrustScores."""

    def __init__(self, weights: tuple[float, float, float] = DEFAULT_WEIGHTS) -> None:
        self.weights = weights
        self.new_scores: TrustScores = trust_scores(TrustCounts(), weights)
        self._counts: dict[Pair, TrustCounts] = {}
        self._scores: dict[Pair, TrustScores] = {}
        self.deprecated_pairs = 0  # pairs in the deprecated tier (0: the policy skips work)

    # -- reading -------------------------------------------------------------------
    def scores(self, agent_id: str, task_type: str) -> TrustScores:
        """A pair's scores (a never-seen pair has the new-profile scores)."""
        return self._scores.get((agent_id, task_type), self.new_scores)

    def counts(self, agent_id: str, task_type: str) -> TrustCounts:
        """A copy of a pair's counts (empty counts for a never-seen pair)."""
        found = self._counts.get((agent_id, task_type))
        return TrustCounts() if found is None else replace(found)

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

    def set_decay(self, pair: Pair, offsets: tuple[float, float, float],
                  decayed_at: datetime | None, deprecated_at: datetime | None) -> TrustScores:
        """Put the lifecycle job's marks on a pair; returns its scores."""
        counts = self._counts.setdefault(pair, TrustCounts())
        counts.set_decay(offsets, decayed_at, deprecated_at)
        return self._set_scores(pair, counts)

    def all_counts(self) -> dict[Pair, TrustCounts]:
        """A copy of every pair's counts."""
        return {pair: replace(c) for pair, c in self._counts.items()}

    def reset(self, counts: dict[Pair, TrustCounts]) -> None:
        """Start over from ``counts`` (the book takes the objects), forgetting every
        other pair (before the log is folded again)."""
        self._counts, self._scores, self.deprecated_pairs = dict(counts), {}, 0
        for pair, c in counts.items():
            self._set_scores(pair, c)

    def _set_scores(self, key: Pair, counts: TrustCounts) -> TrustScores:
        scores = trust_scores(counts, self.weights)
        old = self._scores.get(key)
        self.deprecated_pairs += ((scores.tier is Tier.DEPRECATED)
                                  - (old is not None and old.tier is Tier.DEPRECATED))
        self._scores[key] = scores
        return scores

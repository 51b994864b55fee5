"""Calibrating hand-off thresholds from a labelled sample: the pure search, no I/O.

The reference formula stays as it is; calibration only chooses ``score_threshold`` (where
retrieval counts as insufficient) and ``confidence_low_threshold`` (where we transfer).

Why the recall point is chosen conservatively: putting the threshold exactly at the
``target_recall`` quantile of the sample's needs-human cases gives a rule whose recall on
new data falls short of the target about half the time. We instead treat the needs-human
confidences as a sample from their distribution and pick the order statistic ``k`` such
that, with probability ``recall_confidence``, the true recall is at least ``target_recall``
(distribution-free: the recall of the k-th smallest of P draws is Beta(k, P-k+1)
distributed, so P(recall >= t) = P(Binomial(P, t) <= k-1)). With few needs-human cases
this asks for every one of them to transfer; with hundreds the margin is a point or two.

Given that recall point, the search over ``score_threshold`` minimises the share of
covered cases transferred among the thresholds that reach it; ties go to the threshold
where "insufficient" and "transfer" agree most often (so the reason texts tell the
truth), then to the one nearest the starting threshold. ``confidence_low_threshold``
goes midway between the last needs-human confidence that must transfer and the next
confidence above it: the widest margin the sample allows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustroute.router.handoff.settings import RetrievalConfidenceConfig
from trustroute.router.stats import binomial_cdf

MAX_CANDIDATES = 512  # score thresholds tried; quantile-spaced when the sample is larger


@dataclass(frozen=True, slots=True)
class ThresholdChoice:
    """What the search chose, and the rank behind the recall point."""

    score_threshold: float
    confidence_low_threshold: float
    required_transfers: int
    guarantee_met: bool


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """How calibrated thresholds behave on the calibration sample itself.

    ``recall`` is the share of needs-human cases that transfer, ``false_transfer_rate``
    the share of covered cases that transfer; ``reference_*`` are the same figures for
    the thresholds calibration started from. ``guarantee_met`` is False when the sample
    has too few needs-human cases for ``recall_confidence`` (every one then transfers).
    """

    target_recall: float
    recall_confidence: float
    recall: float
    false_transfer_rate: float
    auroc: float | None
    needs_human: int
    covered: int
    required_transfers: int
    guarantee_met: bool
    score_threshold: float
    confidence_low_threshold: float
    confidence_high_threshold: float
    reference_recall: float
    reference_false_transfer_rate: float
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def required_rank(positives: int, target_recall: float, recall_confidence: float) -> int:
    """Smallest k with P(Binomial(positives, target) <= k-1) >= recall_confidence.

    Transferring the k lowest-confidence needs-human cases of the sample then gives a
    rule whose true recall is >= ``target_recall`` with probability ``recall_confidence``.
    Capped at ``positives`` (when the sample is too small for the guarantee).
    """
    if positives <= 0:
        return 0
    if target_recall >= 1.0:
        return positives
    cdf = binomial_cdf(positives, target_recall)
    # cdf[j] = P(X <= j); we need the smallest k with cdf[k-1] >= confidence
    reached = np.nonzero(cdf >= recall_confidence - 1e-12)[0]
    k = int(reached[0]) + 1 if reached.size else positives + 1
    return max(1, min(k, positives))


def rank_is_guaranteed(positives: int, target_recall: float, recall_confidence: float) -> bool:
    """True when the sample is large enough for the recall guarantee to hold."""
    if positives <= 0:
        return False
    if target_recall >= 1.0:
        return True
    # transferring all P cases: P(recall >= t) = P(Binomial(P, t) <= P-1) = 1 - t^P
    return 1.0 - target_recall**positives >= recall_confidence - 1e-12


def confidences(
    max_scores: NDArray[np.float64],
    hits: NDArray[np.float64],
    score_threshold: float,
    config: RetrievalConfidenceConfig,
) -> NDArray[np.float64]:
    """The reference confidence of each example (vectorised; no factors, no tokens)."""
    insufficient = (hits < config.min_hits) | (max_scores < score_threshold)
    raw = (
        config.score_weight * max_scores
        + config.hits_weight * np.minimum(1.0, hits / config.hits_saturation)
        - config.insufficient_penalty * insufficient
    )
    return np.clip(raw, 0.0, 1.0)


def _score_cut(max_scores: NDArray[np.float64], needs: NDArray[np.bool_], k: int) -> float:
    """Midway between the k-th lowest needs-human best score and the next score above."""
    kth = float(np.sort(max_scores[needs])[k - 1])
    above = max_scores[max_scores > kth]
    return (kth + float(above.min())) / 2.0 if above.size else kth + 1e-6


def _candidate_thresholds(
    max_scores: NDArray[np.float64], start: float, extra: list[float]
) -> NDArray[np.float64]:
    values = np.unique(max_scores)
    if values.size == 0:
        return np.array([start, *extra])
    mids = (values[:-1] + values[1:]) / 2.0
    cands = np.concatenate(([values[0] - 1e-6], mids, [values[-1] + 1e-6]))
    if cands.size > MAX_CANDIDATES:
        idx = np.unique(np.linspace(0, cands.size - 1, MAX_CANDIDATES).round().astype(int))
        cands = cands[idx]
    return np.unique(np.concatenate((cands, [start, *extra])))


def _low_threshold(conf: NDArray[np.float64], needs: NDArray[np.bool_], k: int) -> float:
    """Midway between the k-th lowest needs-human confidence and the next value above."""
    if k <= 0:
        return 0.0
    kth = float(np.sort(conf[needs])[k - 1])
    above = conf[conf > kth]
    if above.size == 0:
        return min(1.0, kth + 1e-9) if kth < 1.0 else 1.0
    return (kth + float(above.min())) / 2.0


def search_thresholds(
    max_scores: NDArray[np.float64],
    hits: NDArray[np.float64],
    needs_human: NDArray[np.bool_],
    *,
    config: RetrievalConfidenceConfig,
    target_recall: float,
    recall_confidence: float,
    always_transfer: int = 0,
) -> ThresholdChoice:
    """Choose (score_threshold, confidence_low_threshold) for examples with retrieval.

    ``config`` holds the formula's constants (kept) and the starting ``score_threshold``
    (ties go to the threshold nearest it). ``always_transfer`` counts needs-human
    examples without any retrieval: they transfer whatever the thresholds, and count
    towards the required recall.
    """
    positives = int(needs_human.sum()) + always_transfer
    k_total = required_rank(positives, target_recall, recall_confidence)
    guaranteed = rank_is_guaranteed(positives, target_recall, recall_confidence)
    k = max(0, k_total - always_transfer)
    covered = ~needs_human
    best: tuple[tuple[float, ...], float, float] | None = None
    # the cut on the best score alone is optimal when every example has the same number
    # of hits (the usual top-k retrieval), so it is always among the candidates
    extra = [_score_cut(max_scores, needs_human, k)] if k > 0 else []
    start_threshold = config.score_threshold
    for threshold in _candidate_thresholds(max_scores, start_threshold, extra):
        conf = confidences(max_scores, hits, float(threshold), config)
        low = _low_threshold(conf, needs_human, k)
        transfer = conf < low
        shortfall = max(0, k - int(transfer[needs_human].sum()))  # > 0 only at confidence 1
        false_rate = float(transfer[covered].mean()) if covered.any() else 0.0
        insufficient = (hits < config.min_hits) | (max_scores < threshold)
        agreement = float((insufficient == transfer).mean()) if transfer.size else 1.0
        key = (
            shortfall,
            round(false_rate, 12),
            -round(agreement, 12),
            abs(float(threshold) - start_threshold),
        )
        if best is None or key < best[0]:
            best = (key, float(threshold), low)
    assert best is not None
    return ThresholdChoice(
        score_threshold=best[1],
        confidence_low_threshold=best[2],
        required_transfers=k_total,
        guarantee_met=guaranteed,
    )


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
from functools import reduce
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustroute.router.handoff.inputs import Example
from trustroute.router.handoff.settings import RetrievalConfidenceConfig
from trustroute.router.stats import auroc, binomial_cdf

MAX_CANDIDATES = 512  # score thresholds tried; quantile-spaced when the sample is larger

Floats = NDArray[np.float64]
Flags = NDArray[np.bool_]


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
    config: RetrievalConfidenceConfig, max_scores: Floats, hits: Floats, tokens: Any = None
) -> tuple[Floats, Flags]:
    """What ``evaluate`` gives each example (no additional factors): its confidence, and
    whether its retrieval is insufficient. Examples without hits get the no-retrieval
    confidence."""
    insufficient = reduce(np.logical_or, config.insufficiencies(max_scores, hits, tokens).values())
    conf = np.clip(config.terms(max_scores, hits, insufficient)["raw"], 0.0, 1.0)
    return np.where(hits > 0, conf, config.no_retrieval_confidence), insufficient


def _midway(values: Floats, needs: Flags, k: int, step: float, ceiling: float) -> float:
    """Midway between the k-th lowest needs-human value and the next value above it."""
    kth = float(np.sort(values[needs])[k - 1])
    above = values[values > kth]
    return (kth + float(above.min())) / 2.0 if above.size else min(ceiling, kth + step)


def _candidate_thresholds(max_scores: Floats, extra: list[float]) -> Floats:
    values = np.unique(max_scores)
    if values.size == 0:
        return np.array(extra)
    mids = (values[:-1] + values[1:]) / 2.0
    cands = np.concatenate(([values[0] - 1e-6], mids, [values[-1] + 1e-6]))
    if cands.size > MAX_CANDIDATES:
        idx = np.unique(np.linspace(0, cands.size - 1, MAX_CANDIDATES).round().astype(int))
        cands = cands[idx]
    return np.unique(np.concatenate((cands, extra)))


def search_thresholds(
    config: RetrievalConfidenceConfig, max_scores: Floats, hits: Floats, needs: Flags, k: int
) -> tuple[float, float]:
    """(score_threshold, confidence_low_threshold) transferring the ``k`` lowest
    needs-human examples (all with retrieval) and as few covered ones as possible.

    ``config`` holds the formula's constants (kept) and the starting ``score_threshold``
    (ties go to the threshold nearest it).
    """
    start = config.score_threshold
    # the cut on the best score alone is optimal when every example has the same number
    # of hits (the usual top-k retrieval), so it is always among the candidates
    extra = [start, _midway(max_scores, needs, k, 1e-6, np.inf)] if k > 0 else [start]
    best: tuple[tuple[float, ...], float, float] | None = None
    for threshold in map(float, _candidate_thresholds(max_scores, extra)):
        trial = config.model_copy(update={"score_threshold": threshold})
        conf, insufficient = confidences(trial, max_scores, hits)
        low = _midway(conf, needs, k, 1e-9, 1.0) if k > 0 else 0.0
        transfer = conf < low
        shortfall = max(0, k - int(transfer[needs].sum()))  # > 0 only at confidence 1
        false_rate = float(transfer[~needs].mean()) if (~needs).any() else 0.0
        agreement = float((insufficient == transfer).mean()) if transfer.size else 1.0
        key = (shortfall, round(false_rate, 12), -round(agreement, 12), abs(threshold - start))
        if best is None or key < best[0]:
            best = (key, threshold, low)
    assert best is not None
    return best[1], best[2]


def calibrate_config(
    config: RetrievalConfidenceConfig,
    examples: list[Example],
    *,
    target_recall: float,
    recall_confidence: float,
) -> tuple[RetrievalConfidenceConfig, CalibrationReport]:
    """``config`` with calibrated thresholds, and how they do on ``examples`` (parsed).

    Needs-human examples without any retrieval transfer whatever the thresholds and count
    towards the required recall; the search runs on the examples with retrieval.
    """
    needs = np.array([e[1] for e in examples], dtype=bool)
    if not needs.any() or needs.all():
        raise ValueError(
            "calibration needs both needs-human and covered examples; got "
            f"{int(needs.sum())} needs-human and {int((~needs).sum())} covered"
        )
    max_scores = np.array([max(e[0], default=0.0) for e in examples], dtype=float)
    hits = np.array([len(e[0]) for e in examples], dtype=float)
    tokens = np.array([np.nan if e[2] is None else e[2] for e in examples], dtype=float)
    retrieved = hits > 0
    k_total = required_rank(int(needs.sum()), target_recall, recall_confidence)
    k = max(0, k_total - int((needs & ~retrieved).sum()))
    threshold, low = search_thresholds(
        config, max_scores[retrieved], hits[retrieved], needs[retrieved], k
    )
    gap = config.confidence_high_threshold - config.confidence_low_threshold
    tuned = config.model_copy(
        update={
            "score_threshold": threshold,
            "confidence_low_threshold": low,
            "confidence_high_threshold": min(1.0, max(low, low + gap)),
        }
    )

    def transfers(c: RetrievalConfidenceConfig) -> tuple[Floats, Flags]:
        conf, _ = confidences(c, max_scores, hits, tokens)
        return conf, (conf < c.confidence_low_threshold) | ~retrieved

    conf, moved = transfers(tuned)
    _, moved_ref = transfers(config)
    report = CalibrationReport(
        target_recall=target_recall,
        recall_confidence=recall_confidence,
        recall=float(moved[needs].mean()),
        false_transfer_rate=float(moved[~needs].mean()),
        auroc=auroc(-conf, needs),
        needs_human=int(needs.sum()),
        covered=int((~needs).sum()),
        required_transfers=k_total,
        guarantee_met=rank_is_guaranteed(int(needs.sum()), target_recall, recall_confidence),
        score_threshold=threshold,
        confidence_low_threshold=low,
        confidence_high_threshold=tuned.confidence_high_threshold,
        reference_recall=float(moved_ref[needs].mean()),
        reference_false_transfer_rate=float(moved_ref[~needs].mean()),
        extra={"no_retrieval_examples": int((~retrieved).sum())},
    )
    return tuned, report

"""Calibrating hand-off thresholds from a labelled sample: the pure search, no I/O.

The reference formula stays as it is; calibration only chooses ``score_threshold`` (where
retrieval counts as insufficient) and ``confidence_low_threshold`` (where we transfer).

Why the recall point is chosen this way (split-conformal rank): transferring the ``k``
lowest-confidence needs-human cases of a sample of ``P`` gives a rule whose recall on a
new needs-human case is, distribution-free, ``k / (P + 1)`` in expectation (the k-th
smallest of P draws splits the distribution into P + 1 equally likely parts). The
sample's own recall ``k / P`` overstates it, most with few cases, so we take the
smallest ``k`` with ``k / (P + 1) >= target_recall``: the conformal correction, which
aims *at* the target (at most ``1 / (P + 1)`` above it in expectation) instead of a lower
confidence bound, which with ~100 needs-human cases overshoots by several points of
recall and pays for them in false transfers. The lower bound is still reported beside
it (``recall_lower_bound``: the recall the rule reaches with probability
``recall_confidence``, from the Beta law of an order statistic).

Given that recall point, the search over ``score_threshold`` minimises the share of
covered cases transferred among the thresholds that reach it; ties go to the threshold
where "insufficient" and "transfer" agree most often (so the reason texts tell the
truth), then to the one nearest the starting threshold. ``confidence_low_threshold``
goes midway between the last needs-human confidence that must transfer and the next
confidence above it (the widest margin the sample allows at the recall point), except
where the sample's classes separate: then it goes to the middle of the gap between
them, so every needs-human case transfers and no covered one does.
"""

from __future__ import annotations

import math
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
    the thresholds calibration started from. ``expected_recall`` is the recall to expect
    on new needs-human cases (split-conformal: at least ``target_recall``), and
    ``recall_lower_bound`` the recall reached with probability ``recall_confidence``.
    ``guarantee_met`` is False when the sample has too few needs-human cases for the
    expected recall to reach the target (every one of them then transfers).
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
    expected_recall: float = float("nan")
    recall_lower_bound: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def required_rank(positives: int, target_recall: float) -> int:
    """Smallest k with ``k / (positives + 1) >= target_recall``, at most ``positives``.

    Transferring the k lowest-confidence needs-human cases of the sample then gives a
    rule whose expected recall on new needs-human cases is at least ``target_recall``
    (split-conformal), and at most ``1 / (positives + 1)`` above it.
    """
    if positives <= 0:
        return 0
    k = math.ceil(target_recall * (positives + 1) - 1e-9)
    return max(1, min(k, positives))


def rank_is_guaranteed(positives: int, target_recall: float) -> bool:
    """True when the sample is large enough for the expected recall to reach the target."""
    return positives > 0 and positives / (positives + 1) >= target_recall - 1e-12


def expected_recall(transferred: int, positives: int) -> float:
    """Expected recall on new cases of a rule transferring ``transferred`` of ``positives``
    sample needs-human cases (the lowest ones): ``transferred / (positives + 1)``."""
    return transferred / (positives + 1) if positives > 0 else float("nan")


def recall_lower_bound(transferred: int, positives: int, confidence: float) -> float:
    """The recall a rule transferring the ``transferred`` lowest of ``positives`` sample
    needs-human cases reaches on new data with probability ``confidence``.

    Its recall is distributed like the ``transferred``-th smallest of ``positives``
    uniforms, Beta(k, P - k + 1), so ``P(recall >= t) = P(Binomial(P, t) <= k - 1)``;
    the bound is the ``t`` where that equals ``confidence`` (found by bisection).
    """
    if transferred <= 0 or positives <= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2.0
        if binomial_cdf(positives, mid)[transferred - 1] >= confidence:
            lo = mid
        else:
            hi = mid
    return lo


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


def cut_at_rank(values: Floats, needs: Flags, k: int, step: float, ceiling: float) -> float:
    """Where to transfer below: the middle of the gap between the classes when the
    sample separates them (every needs-human value below every covered one), else
    midway between the k-th lowest needs-human value and the next value above it."""
    covered = values[~needs]
    if covered.size and values[needs].max() < covered.min():
        return (float(values[needs].max()) + float(covered.min())) / 2.0
    return _midway(values, needs, k, step, ceiling)


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
    config: RetrievalConfidenceConfig, max_scores: Floats, hits: Floats, needs: Flags, k: int,
    tokens: Any = None,
) -> tuple[float, float]:
    """(score_threshold, confidence_low_threshold) transferring the ``k`` lowest
    needs-human examples (all with retrieval) and as few covered ones as possible, ranked
    by the confidence ``evaluate`` gives them (their evidence ``tokens`` too, when given).

    ``config`` holds the formula's constants (kept) and the starting ``score_threshold``
    (ties go to the threshold nearest it).
    """
    start = config.score_threshold
    # the cut on the best score alone is optimal when every example has the same number
    # of hits (the usual top-k retrieval), so it is always among the candidates
    extra = [start, _midway(max_scores, needs, k, 1e-6, np.inf),
             cut_at_rank(max_scores, needs, k, 1e-6, np.inf)] if k > 0 else [start]
    best: tuple[tuple[float, ...], float, float] | None = None
    for threshold in map(float, _candidate_thresholds(max_scores, extra)):
        trial = config.model_copy(update={"score_threshold": threshold})
        conf, insufficient = confidences(trial, max_scores, hits, tokens)
        low = cut_at_rank(conf, needs, k, 1e-9, 1.0) if k > 0 else 0.0
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
    positives = int(needs.sum())
    k_total = required_rank(positives, target_recall)
    k = max(0, k_total - int((needs & ~retrieved).sum()))
    threshold, low = search_thresholds(
        config, max_scores[retrieved], hits[retrieved], needs[retrieved], k, tokens[retrieved]
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
    if (transferred := int(moved[needs].sum())) < k_total:  # only confidence 1 is left
        stuck = int((needs & retrieved & (conf >= 1.0)).sum())
        raise ValueError(
            f"no thresholds transfer {k_total} of the {positives} needs-human examples: "
            f"{stuck} of them have confidence 1.0, which nothing transfers (scores of 1 or "
            "more count as 1: are the scores relevance in [0, 1]? map raw ones there, e.g. "
            f"with relevance_score_fn); {transferred} would transfer")
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
        guarantee_met=rank_is_guaranteed(positives, target_recall),
        score_threshold=threshold,
        confidence_low_threshold=low,
        confidence_high_threshold=tuned.confidence_high_threshold,
        reference_recall=float(moved_ref[needs].mean()),
        reference_false_transfer_rate=float(moved_ref[~needs].mean()),
        expected_recall=expected_recall(transferred, positives),
        recall_lower_bound=recall_lower_bound(transferred, positives, recall_confidence),
        extra={"no_retrieval_examples": int((~retrieved).sum())},
    )
    return tuned, report

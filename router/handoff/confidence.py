"""Retrieval confidence: should a retrieval-augmented agent answer, or hand over to a person?

The reference formula, kept exactly so results compare with the reference design::

    confidence = 0.7 x max_score + 0.3 x min(1, hits / 5)
                 - insufficient_penalty   (when retrieval is insufficient)
                 + 0.1 x each additional factor,   clamped to [0, 1]

Retrieval is insufficient when there are fewer than ``min_hits`` hits, the best score is
below ``score_threshold``, or the evidence exceeds ``max_evidence_tokens``; every reason
that applies is listed. Transfer when confidence < ``confidence_low_threshold``. No
retrieval at all gives confidence 0.3 and a transfer.

Fixed thresholds do not carry across embedders (cosine scores of one model sit higher or
lower than another's), so ``calibrate`` learns the two thresholds that matter from a
labelled sample; see ``trustroute.router.handoff.calibration`` for how and why.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.calibration import CalibrationReport, calibrate_config
from trustroute.router.handoff.inputs import (
    parse_examples,
    parse_factors,
    parse_scores,
    parse_tokens,
)
from trustroute.router.handoff.messages import join_details, message
from trustroute.router.handoff.settings import (
    HandoffSection,
    RetrievalConfidenceConfig,
    coerce_config,
)

if TYPE_CHECKING:
    from trustroute.profiles.store import Store

__all__ = [
    "CalibrationReport",
    "ConfidenceResult",
    "RetrievalConfidence",
    "RetrievalConfidenceConfig",
]


@dataclass(frozen=True, slots=True)
class ConfidenceResult:
    """One verdict: how confident, whether to hand over, why, and every number behind it.

    ``transfer_reason`` is set when transferring, and also when answering with
    insufficient retrieval below the high threshold (an "answer may be inaccurate" note);
    otherwise None. ``reasons`` holds the machine-readable codes behind the text.
    """

    confidence: float
    should_transfer: bool
    transfer_reason: str | None
    is_retrieval_insufficient: bool
    diagnostics: dict[str, Any] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()

    @property
    def level(self) -> str:
        """``low`` (transfer), ``medium`` or ``high`` against the config's thresholds."""
        return str(self.diagnostics.get("level", "low"))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (a copy: changing it leaves the result as it was)."""
        return {**asdict(self), "reasons": list(self.reasons)}


class _HybridMethod:
    """``RetrievalConfidence.calibrate`` works on the class (reference defaults as the
    starting point) and on an instance (its settings as the starting point)."""

    def __init__(self, func: Any) -> None:
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj: Any, owner: type) -> Any:
        return functools.update_wrapper(functools.partial(self.func, owner, obj), self.func)


class CalibrationNotFound(KeyError):
    """No calibration of that name is saved; the message says how to create one."""

    def __str__(self) -> str:  # KeyError's own str() quotes the message like a key
        return str(self.args[0]) if self.args else ""


class RetrievalConfidence:
    """Scores retrieval results and decides whether to hand a question to a person."""

    def __init__(self, config: Any = None, **overrides: Any) -> None:
        self.config: RetrievalConfidenceConfig = coerce_config(config, **overrides)
        self.locale = self.config.locale
        self.calibration: CalibrationReport | None = None

    def __repr__(self) -> str:
        c = self.config
        return (
            f"RetrievalConfidence(score_threshold={c.score_threshold:.4g}, "
            f"confidence_low_threshold={c.confidence_low_threshold:.4g}, "
            f"min_hits={c.min_hits}, locale={self.locale!r})"
        )

    @property
    def report(self) -> CalibrationReport | None:
        """The calibration report when this object came from ``calibrate`` (else None)."""
        return self.calibration

    # -- the formula -----------------------------------------------------------------------
    def evaluate(
        self, scores: Any, evidence_tokens: Any = None, additional_factors: Any = None
    ) -> ConfidenceResult:
        """Confidence that retrieval supports an answer, and whether to transfer.

        ``scores``: relevance scores of the retrieved documents (numbers, ``(doc, score)``
        pairs or ``{"score": ...}`` mappings); None or empty means nothing was retrieved.
        ``evidence_tokens``: size of the evidence passed to the model (None: not checked).
        ``additional_factors``: ``{name: value}`` or numbers, each adding 0.1 x value.
        """
        c = self.config
        values = parse_scores(scores)
        tokens = parse_tokens(evidence_tokens)
        factors = parse_factors(additional_factors)
        diag: dict[str, Any] = {
            "hits": len(values),
            "min_hits": c.min_hits,
            "score_threshold": c.score_threshold,
            "evidence_tokens": tokens,
            "max_evidence_tokens": c.max_evidence_tokens,
            "confidence_low_threshold": c.confidence_low_threshold,
            "confidence_high_threshold": c.confidence_high_threshold,
            "insufficient_penalty": c.insufficient_penalty,
            "factors": factors,
            "locale": self.locale,
        }
        if not values:
            conf = c.no_retrieval_confidence
            diag.update(
                no_retrieval=True,
                max_score=None,
                mean_score=None,
                insufficient_reasons=["no_retrieval"],
                raw_confidence=conf,
                confidence=conf,
                clamped=False,
                level="low",
                note="factors are not applied when nothing was retrieved",
            )
            return ConfidenceResult(
                conf, True, message("no_retrieval", self.locale), True, diag, ("no_retrieval",)
            )
        max_score = max(values)
        failed = c.insufficiencies(max_score, len(values), tokens)
        codes = [code for code, applies in failed.items() if applies]
        insufficient = bool(codes)
        terms = c.terms(max_score, len(values), insufficient)
        terms = {name: float(value) for name, value in terms.items()}
        contributions = {name: c.factor_weight * v for name, v in factors.items()}
        factor_total = math.fsum(contributions.values())
        raw = terms.pop("raw") + factor_total
        conf = min(1.0, max(0.0, raw))
        transfer = conf < c.confidence_low_threshold
        level = "low" if transfer else ("medium" if conf < c.confidence_high_threshold else "high")
        diag.update(
            terms,
            no_retrieval=False,
            max_score=max_score,
            mean_score=math.fsum(values) / len(values),
            min_score=min(values),
            factor_contributions=contributions,
            factor_total=factor_total,
            raw_confidence=raw,
            confidence=conf,
            clamped=raw != conf,
            insufficient_reasons=codes,
            level=level,
        )
        fields = {**diag, "threshold": c.confidence_low_threshold}
        details = join_details(codes, fields, self.locale)
        reason: str | None = None
        result_codes = list(codes)
        if transfer:
            key = "insufficient" if insufficient else "low_confidence"
            reason = message(key, self.locale, details=details, **fields)
            result_codes.append("low_confidence")
        elif insufficient and conf < c.confidence_high_threshold:
            reason = message("may_be_inaccurate", self.locale, details=details, **fields)
            result_codes.append("may_be_inaccurate")
        return ConfidenceResult(conf, transfer, reason, insufficient, diag, tuple(result_codes))

    # -- calibration -----------------------------------------------------------------------
    @_HybridMethod
    def calibrate(
        cls: type[RetrievalConfidence],
        self: RetrievalConfidence | None,
        examples: Iterable[Any],
        *,
        target_recall: float = 0.9,
        recall_confidence: float = 0.95,
        **overrides: Any,
    ) -> RetrievalConfidence:
        """Learn ``score_threshold`` and ``confidence_low_threshold`` from labelled examples.

        ``examples``: ``(scores, needs_human)`` pairs (or ``{"scores", "needs_human"}``
        mappings). The recall to expect on new data from the same distribution is
        ``target_recall`` (split-conformal rank, see ``calibration``), while as few covered
        cases as possible transfer. Returns a new RetrievalConfidence whose
        ``calibration`` (also ``report``) holds the recall, false-transfer rate and AUROC
        achieved on the sample, next to the starting thresholds' figures, the expected
        recall and its lower bound at ``recall_confidence``.
        """
        for name, value in (
            ("target_recall", target_recall),
            ("recall_confidence", recall_confidence),
        ):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
                    not 0.0 < float(value) <= 1.0:  # numpy floats are Real
                raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
        base = cls(self.config if self is not None else None, **overrides)
        config, report = calibrate_config(
            base.config,
            parse_examples(examples),
            target_recall=float(target_recall),
            recall_confidence=float(recall_confidence),
        )
        tuned = cls(config)
        tuned.calibration = report
        return tuned

    # -- persistence -----------------------------------------------------------------------
    def save(self, store: Store, name: str) -> None:
        """Save these settings (and the calibration report) under ``name`` in the store."""
        report = self.calibration.as_dict() if self.calibration else None
        store.repository(HandoffRepository).save_calibration(name, self.config.model_dump(), report)

    @classmethod
    def from_section(
        cls, section: HandoffSection, store: Store | None = None
    ) -> RetrievalConfidence:
        """The settings a config file's ``handoff:`` section describes: its named
        ``calibration`` loaded from ``store`` (when it names one), then its overrides."""
        if section.calibration is None:
            return cls(**section.overrides())
        if store is None:
            raise ValueError(
                f"handoff.calibration {section.calibration!r} needs a store to load it from"
            )
        try:
            return cls.load(store, section.calibration, **section.overrides())
        except CalibrationNotFound as exc:
            raise CalibrationNotFound(f"handoff.calibration: {exc}") from None

    @classmethod
    def load(cls, store: Store, name: str, **overrides: Any) -> RetrievalConfidence:
        """Settings saved under ``name``; ``CalibrationNotFound`` (a KeyError whose one-line
        message says how to create it) when there is none."""
        saved = store.repository(HandoffRepository).load_calibration(name)
        if saved is None:
            raise CalibrationNotFound(
                f"no saved hand-off calibration named {name!r} in {store.url}; create it "
                f"with `trustroute calibrate-handoff --name {name} LABELLED.jsonl` (one "
                '{"scores": [...], "needs_human": true|false} object per line)'
            )
        obj = cls(saved["settings"], **overrides)
        if saved.get("report"):
            obj.calibration = CalibrationReport(**saved["report"])
        return obj

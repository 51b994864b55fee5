"""Hand-off settings: one pydantic model per concern, read alike by the code and the config file.

- ``RetrievalConfidenceConfig``: the thresholds and formula constants of
  ``RetrievalConfidence`` (defaults are the reference design's), and the formula itself,
  written once for one retrieval (``evaluate``) and for arrays of them (calibration);
  ``coerce_config`` reads one from whatever shape the caller holds settings in.
- ``HandoffSection``: the router config's ``handoff:`` section and the
  ``TransferDispatcher``'s options: a saved calibration's name, the thresholds the file
  overrides (typed and bounded exactly as in ``RetrievalConfidenceConfig``; left out: not
  overridden), the hand-off message, and how often the dispatcher tries each hook.

Each bound is written once, as an annotated type both models use, and each default once,
in the model that owns it. The hooks' settings live beside each hook (``WebhookSettings``,
``LoggingSettings``) and are also the ``hooks:`` entries of the config file.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from trustroute.profiles.validation import NumbersNotBools, did_you_mean, validated
from trustroute.router.handoff.messages import normalise_locale

Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
#: A delivery's retries hold the worker thread that every other hand-off waits behind:
#: waits longer than minutes are the sweep's job (``dispatch_retry_interval_s``).
MAX_BACKOFF_S = 300.0
Backoff = Annotated[float, Field(ge=0.0, le=MAX_BACKOFF_S, allow_inf_nan=False)]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Locale = Annotated[str, AfterValidator(normalise_locale)]  # "zh-CN" -> "zh"; unknown: error


class RetrievalConfidenceConfig(NumbersNotBools):
    """Thresholds and formula constants; defaults are the reference design's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Any finite number: scores are relevance in [0, 1], so at 0 or below the best score
    #: never makes retrieval insufficient, and above 1 it always does, a perfect 1.0 too
    #: (what calibration picks when needs-human examples score 1.0: only the penalty
    #: can transfer them).
    score_threshold: Finite = 0.7
    min_hits: Count = 1
    confidence_low_threshold: Probability = 0.5
    confidence_high_threshold: Probability = 0.8
    insufficient_penalty: NonNegative = 0.3
    max_evidence_tokens: Count | None = 2000  # None: no limit
    locale: Locale = "en"
    # the formula's constants (reference values; calibration never changes them)
    score_weight: NonNegative = 0.7
    hits_weight: NonNegative = 0.3
    hits_saturation: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] = 5.0
    factor_weight: Finite = 0.1
    no_retrieval_confidence: Probability = 0.3

    @model_validator(mode="after")
    def _consistent(self) -> RetrievalConfidenceConfig:
        if self.confidence_high_threshold < self.confidence_low_threshold:
            raise ValueError(
                f"confidence_high_threshold ({self.confidence_high_threshold}) must not be "
                f"below confidence_low_threshold ({self.confidence_low_threshold})"
            )
        return self

    # -- the reference formula: numbers for one retrieval, numpy arrays for many ----------
    def insufficiencies(self, max_score: Any, hits: Any, tokens: Any = None) -> dict[str, Any]:
        """Whether each reason for "retrieval insufficient" applies, by reason code, in the
        order reasons are listed. Evidence size None (NaN in an array) is not checked."""
        limit = np.inf if self.max_evidence_tokens is None else self.max_evidence_tokens
        return {
            "too_few_hits": hits < self.min_hits,
            "low_score": max_score < self.score_threshold,
            "token_overflow": np.greater(np.nan if tokens is None else tokens, limit),
        }

    def terms(self, max_score: Any, hits: Any, insufficient: Any) -> dict[str, Any]:
        """The formula's terms before additional factors and clamping; ``raw`` sums them."""
        hit_ratio = np.minimum(1.0, np.divide(hits, self.hits_saturation))
        score_part = self.score_weight * max_score
        hits_part = self.hits_weight * hit_ratio
        penalty = self.insufficient_penalty * insufficient
        return {
            "hit_ratio": hit_ratio,
            "score_component": score_part,
            "hits_component": hits_part,
            "base_confidence": score_part + hits_part,
            "penalty_applied": penalty,
            "raw": score_part + hits_part - penalty,
        }


_FIELDS = frozenset(RetrievalConfidenceConfig.model_fields)


def coerce_config(config: Any = None, **overrides: Any) -> RetrievalConfidenceConfig:
    """A config from None, a dict, a pydantic model, a dataclass or any object with the
    field names as attributes; keyword overrides win. Unknown keys are ignored with a
    warning (configs written for the reference design may carry more keys than ours)."""
    inner = getattr(config, "config", None)
    if isinstance(inner, RetrievalConfidenceConfig):  # a RetrievalConfidence
        config = inner
    if isinstance(config, RetrievalConfidenceConfig) and not overrides:
        return config
    data: dict[str, Any]
    if config is None or isinstance(config, Mapping):
        data = dict(config or {})
    elif isinstance(config, BaseModel):
        data = config.model_dump()
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        data = dataclasses.asdict(config)
    else:
        data = {name: getattr(config, name) for name in _FIELDS if hasattr(config, name)}
        if not data:
            raise TypeError(
                "RetrievalConfidence config must be a dict, a pydantic model or "
                f"an object with threshold attributes, got {type(config).__name__}"
            )
    data.update(overrides)
    unknown = sorted(str(k) for k in data if k not in _FIELDS)
    if unknown:
        named = ", ".join(f"{k}{did_you_mean(k, _FIELDS)}" for k in unknown)
        warnings.warn(
            f"RetrievalConfidence ignores unknown config key(s): {named}",
            UserWarning,
            stacklevel=3,
        )
    return validated(RetrievalConfidenceConfig, {k: v for k, v in data.items() if k in _FIELDS})


class HandoffSection(NumbersNotBools):
    """The ``handoff:`` section: which thresholds to use, what to say, how to dispatch.

    Precedence for the thresholds: reference defaults, then the named ``calibration``
    from the store, then any threshold or locale given here (a setting left out or null
    is not overridden). ``delivery`` says whether hooks run on a background worker (the
    default) or on the caller's thread; ``dispatch_*`` are the TransferDispatcher's retries
    per hook (hooks that retry themselves, like the webhook, are tried once), its queue,
    its background retries, and how long ``close()`` waits for deliveries.
    """

    model_config = ConfigDict(extra="forbid")

    calibration: str | None = Field(default=None, min_length=1, max_length=256)
    score_threshold: Finite | None = None
    min_hits: Count | None = None
    confidence_low_threshold: Probability | None = None
    confidence_high_threshold: Probability | None = None
    insufficient_penalty: NonNegative | None = None
    max_evidence_tokens: Count | None = None
    locale: Locale | None = None
    message: str | None = None
    # background: the caller gets the outcome at once and a worker thread delivers (hooks
    # whose answer the caller waits for, like the LangGraph interrupt, still run inline);
    # sync: every hook on the caller's thread, as a blocking call
    delivery: Literal["background", "sync"] = "background"
    dispatch_attempts: int = Field(default=3, ge=1)
    dispatch_backoff_s: Backoff = 0.2
    dispatch_max_backoff_s: Backoff = 2.0
    # how long ``close()`` waits for hand-offs in flight; what is unfinished stays pending.
    # 5 s: one default webhook attempt (timeout_s 5) fits, and it is half of the 10 s a
    # container runtime (docker stop) gives a process between SIGTERM and SIGKILL
    dispatch_close_timeout_s: NonNegative = 5.0
    # hand-offs waiting for the background worker; beyond it they wait in the store for
    # the next background retry (bounded memory in a long outage). 1000: at the defaults a
    # failing delivery takes ~1.5 s, so 25 minutes of backlog
    dispatch_queue_size: int = Field(default=1000, ge=1)
    # how often the background worker tries again what stayed pending (rows last changed
    # that long ago, from this process or an earlier one); 0: only `handoffs --retry`.
    # 60 s: far longer than one default delivery (3 attempts of 5 s plus backoff, ~17 s),
    # so a row another process is delivering right now is rarely picked up twice
    dispatch_retry_interval_s: NonNegative = 60.0

    @model_validator(mode="after")
    def _thresholds(self) -> HandoffSection:
        """Thresholds that contradict each other (or the defaults they meet) are refused
        here, naming both; under a named ``calibration`` that is known once it is loaded."""
        if self.calibration is None:
            defaults = RetrievalConfidenceConfig.model_fields
            low, high = (("", v) if (v := getattr(self, k)) is not None else
                         (", the default", defaults[k].default)
                         for k in ("confidence_low_threshold", "confidence_high_threshold"))
            if high[1] < low[1]:
                raise ValueError(f"confidence_high_threshold ({high[1]:g}{high[0]}) must not "
                                 f"be below confidence_low_threshold ({low[1]:g}{low[0]})")
        return self

    def overrides(self) -> dict[str, Any]:
        """The RetrievalConfidence settings this section sets explicitly."""
        return self.model_dump(include=set(_FIELDS), exclude_none=True)

"""Settings of RetrievalConfidence, and reading them from whatever the caller has.

Defaults are the reference design's. Callers hold settings in many shapes (a dict from
a YAML file, a pydantic model, a dataclass, keyword arguments); ``coerce_config``
accepts them all, and ignores keys it does not know with a warning rather than an error,
because configs written for the reference design may carry more keys than ours.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from trustroute.router.handoff.calibration import FormulaShape
from trustroute.router.handoff.messages import normalise_locale


class RetrievalConfidenceConfig(BaseModel):
    """Thresholds and formula constants; defaults are the reference design's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    score_threshold: float = Field(default=0.7, allow_inf_nan=False)
    min_hits: int = Field(default=1, ge=0)
    confidence_low_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    confidence_high_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    insufficient_penalty: float = Field(default=0.3, ge=0.0, allow_inf_nan=False)
    max_evidence_tokens: int | None = Field(default=2000, ge=0)
    locale: str = "en"
    # the formula's constants (reference values; calibration never changes them)
    score_weight: float = Field(default=0.7, ge=0.0, allow_inf_nan=False)
    hits_weight: float = Field(default=0.3, ge=0.0, allow_inf_nan=False)
    hits_saturation: float = Field(default=5.0, gt=0.0, allow_inf_nan=False)
    factor_weight: float = Field(default=0.1, allow_inf_nan=False)
    no_retrieval_confidence: float = Field(default=0.3, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _consistent(self) -> RetrievalConfidenceConfig:
        if self.confidence_high_threshold < self.confidence_low_threshold:
            raise ValueError(
                f"confidence_high_threshold ({self.confidence_high_threshold}) must not be "
                f"below confidence_low_threshold ({self.confidence_low_threshold})"
            )
        normalise_locale(self.locale)
        return self

    @property
    def shape(self) -> FormulaShape:
        """The constants calibration holds fixed."""
        return FormulaShape(
            self.score_weight,
            self.hits_weight,
            self.hits_saturation,
            self.insufficient_penalty,
            self.min_hits,
        )


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
    if config is None:
        data = {}
    elif isinstance(config, Mapping):
        data = dict(config)
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
        warnings.warn(
            f"RetrievalConfidence ignores unknown config key(s): {', '.join(unknown)}",
            UserWarning,
            stacklevel=3,
        )
    return RetrievalConfidenceConfig(**{k: v for k, v in data.items() if k in _FIELDS})

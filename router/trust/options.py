"""``TrustOptions``: everything the trust layer is configured with (config ``trust``).

One model for the config file and for code (``AgentRouter(trust=TrustOptions(...))``);
the defaults and their reasons are in docs/trust.md.
"""

from __future__ import annotations

import math

from pydantic import Field, field_validator, model_validator

from trustroute.router.trust.calibration import CalibrationSettings
from trustroute.router.trust.decay import DecaySettings
from trustroute.router.trust.policy import TierPolicy
from trustroute.router.trust.rescues import RESCUE_MEMORY
from trustroute.router.trust.scores import DEFAULT_WEIGHTS, check_weights
from trustroute.router.trust.settings import Settings


class ConfidenceTiers(Settings):
    """Calibrated confidence from which a decision is ``medium`` / ``strong``."""

    medium: float = Field(default=0.5, ge=0, le=1)
    strong: float = Field(default=0.8, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> ConfidenceTiers:
        if self.medium > self.strong:
            raise ValueError(f"medium ({self.medium}) must not exceed strong ({self.strong})")
        return self

    def tier_of(self, confidence: float) -> str:
        """``weak``, ``medium`` or ``strong``."""
        return "strong" if confidence >= self.strong else \
            "medium" if confidence >= self.medium else "weak"


class TrustOptions(Settings):
    """Composite trust, tiers, calibration, lifecycle and the decision log."""

    weights: tuple[float, float, float] = DEFAULT_WEIGHTS  # frequency, effectiveness, human
    confidence_tiers: ConfidenceTiers = Field(default_factory=ConfidenceTiers)
    policy: TierPolicy = Field(default_factory=TierPolicy)
    calibration: CalibrationSettings = Field(default_factory=CalibrationSettings)
    decay: DecaySettings = Field(default_factory=DecaySettings)
    unknown_probability: float = Field(default=0.5, ge=0, le=1)  # when no strategy estimate
    log_decisions: bool = True
    log_candidates: int | None = Field(default=8, ge=1)  # ranking head logged; None: all
    flush_every: int = Field(default=16, ge=1)
    flush_seconds: float = Field(default=1.0, ge=0)
    rescue_memory: int = Field(default=RESCUE_MEMORY, ge=1)  # user tasks the rescue tracker keeps

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if not math.isclose(sum(check_weights(value)), 1.0, abs_tol=1e-6):
            raise ValueError(f"weights must sum to 1 (frequency, effectiveness, human), "
                             f"got {sum(value):g}")
        return value

"""Config sections of the trust layer: ``trust`` and ``abstention``.

```yaml
trust:
  weights: [0.35, 0.40, 0.25]        # frequency, effectiveness, human
  confidence_tiers: {medium: 0.5, strong: 0.8}
  policy: {exclude_deprecated: true, exploit_trusted_only: true,
           new_profile_observations: 3}
  calibration: {buckets: 10, prior_strength: 20, min_count: 10, horizon: 1000}
  decay: {unseen_days: 7, frequency: 0.02, effectiveness: 0.01, human: 0.005,
          deprecate_below: 0.2, delete_after_days: 30}
abstention:
  on_abstain: route_anyway           # or human, raise
  weak_resonance: {enabled: true, floor: 0.5}
  sparse_evidence: {enabled: false, min_candidates: 2}
  conflicted: {enabled: false, ceiling: 0.4}
```
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from trustroute.router.trust.abstention import (
    AbstentionPolicy,
    Conflicted,
    Gate,
    OnAbstain,
    SparseEvidence,
    WeakResonance,
)
from trustroute.router.trust.calibration import CalibrationSettings
from trustroute.router.trust.decay import DecaySettings
from trustroute.router.trust.layer import TrustOptions
from trustroute.router.trust.policy import TierPolicy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConfidenceTiersSection(_Strict):
    """Calibrated confidence from which a decision is ``medium`` / ``strong``."""

    medium: float = Field(default=0.5, ge=0, le=1)
    strong: float = Field(default=0.8, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> ConfidenceTiersSection:
        if self.medium > self.strong:
            raise ValueError(f"medium ({self.medium}) must not exceed strong ({self.strong})")
        return self


class TierPolicySection(_Strict):
    """How trust tiers restrict candidates."""

    exclude_deprecated: bool = True
    exploit_trusted_only: bool = True
    new_profile_observations: int = Field(default=3, ge=0)


class CalibrationSection(_Strict):
    """The calibration map (see profiles/calibration.py for the reasons)."""

    buckets: int = Field(default=10, ge=1, le=1000)
    prior_strength: float = Field(default=20.0, ge=0, allow_inf_nan=False)
    min_count: int = Field(default=10, ge=0)
    horizon: float = Field(default=1000.0, ge=0, allow_inf_nan=False)

    @field_validator("horizon")
    @classmethod
    def _horizon(cls, value: float) -> float:
        if 0 < value < 1:
            raise ValueError("must be 0 (never forget) or >= 1 outcomes")
        return value


class DecaySection(_Strict):
    """The weekly lifecycle job."""

    unseen_days: float = Field(default=7.0, ge=0, allow_inf_nan=False)
    frequency: float = Field(default=0.02, ge=0, le=1)
    effectiveness: float = Field(default=0.01, ge=0, le=1)
    human: float = Field(default=0.005, ge=0, le=1)
    deprecate_below: float = Field(default=0.2, ge=0, le=1)
    delete_after_days: float = Field(default=30.0, ge=0, allow_inf_nan=False)


class TrustSection(_Strict):
    """Composite trust, tiers, calibration and lifecycle."""

    weights: tuple[float, float, float] = (0.35, 0.40, 0.25)
    confidence_tiers: ConfidenceTiersSection = Field(default_factory=ConfidenceTiersSection)
    policy: TierPolicySection = Field(default_factory=TierPolicySection)
    calibration: CalibrationSection = Field(default_factory=CalibrationSection)
    decay: DecaySection = Field(default_factory=DecaySection)
    log_decisions: bool = True
    log_candidates: int | None = Field(default=8, ge=1)
    flush_every: int = Field(default=16, ge=1)
    flush_seconds: float = Field(default=1.0, ge=0, allow_inf_nan=False)

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(not math.isfinite(w) or w < 0 for w in value):
            raise ValueError("weights must be finite and >= 0")
        if abs(sum(value) - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1 (frequency, effectiveness, human), "
                             f"got {sum(value):g}")
        return value

    def options(self) -> TrustOptions:
        """As the router's TrustOptions."""
        return TrustOptions(
            weights=self.weights,
            policy=TierPolicy(**self.policy.model_dump()),
            calibration=CalibrationSettings(**self.calibration.model_dump()),
            decay=DecaySettings(**self.decay.model_dump()),
            confidence_tiers=(self.confidence_tiers.medium, self.confidence_tiers.strong),
            log_decisions=self.log_decisions, log_candidates=self.log_candidates,
            flush_every=self.flush_every,
            flush_seconds=self.flush_seconds,
        )


class WeakResonanceSection(_Strict):
    """No candidate's calibrated success probability reaches ``floor``."""

    enabled: bool = True
    floor: float = Field(default=0.5, ge=0, le=1)


class SparseEvidenceSection(_Strict):
    """Fewer than ``min_candidates`` candidates with outcomes for the task type."""

    enabled: bool = False
    min_candidates: int = Field(default=2, ge=1)


class ConflictedSection(_Strict):
    """The runner-up is better than the choice with probability above ``ceiling``."""

    enabled: bool = False
    ceiling: float = Field(default=0.4, ge=0, le=1)


class AbstentionSection(_Strict):
    """When the router abstains and what it then does."""

    on_abstain: OnAbstain = "route_anyway"
    weak_resonance: WeakResonanceSection = Field(default_factory=WeakResonanceSection)
    sparse_evidence: SparseEvidenceSection = Field(default_factory=SparseEvidenceSection)
    conflicted: ConflictedSection = Field(default_factory=ConflictedSection)

    def policy(self) -> AbstentionPolicy:
        """As the router's AbstentionPolicy (gates in the documented order)."""
        gates: list[Gate] = []
        if self.weak_resonance.enabled:
            gates.append(WeakResonance(self.weak_resonance.floor))
        if self.sparse_evidence.enabled:
            gates.append(SparseEvidence(self.sparse_evidence.min_candidates))
        if self.conflicted.enabled:
            gates.append(Conflicted(self.conflicted.ceiling))
        return AbstentionPolicy(tuple(gates), self.on_abstain)

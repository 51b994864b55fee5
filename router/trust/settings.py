"""The base of the trust layer's settings models.

Each concern has one pydantic model (``TierPolicy``, ``CalibrationSettings``,
``DecaySettings``, ``AbstentionPolicy`` and its gates, ``TrustOptions`` around them)
that is both the config file's section and the object code passes in, so every default
is written once. Unknown keys are an error, values are checked, instances are frozen.
"""

from __future__ import annotations

from pydantic import ConfigDict

from trustroute.profiles.validation import NumbersNotBools


class Settings(NumbersNotBools):
    """Strict, immutable settings: unknown keys, NaN and infinities are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

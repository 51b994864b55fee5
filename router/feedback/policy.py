"""``FeedbackPolicy``: how late verdicts become quality (constructor ``feedback=``,
config section ``feedback``; docs/feedback.md).

- ``wait_s`` (default 0: quality is known when a run is recorded, today's behaviour).
  With ``wait_s > 0`` a successful run recorded without a quality is *pending*: it is
  not evidence yet, and ``default`` settles it once ``wait_s`` has passed since the
  record's own timestamp (as each router's clock sees it) without feedback.
- ``default``: ``"outcome"`` (success 1.0), ``"ignore"`` (never quality evidence; it
  still counts as a run, for latency and cost) or a number in [0, 1].
- ``keys``: per feedback key a ``weight`` and an optional ``scale`` ``[low, high]`` (a
  1-10 judge: ``[1, 10]``); several keys on one execution combine as a weighted mean.
- ``remember``: how many recent executions a verdict amends at once (older: at the
  router's next rebuild).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from trustroute.profiles.records import check_finite
from trustroute.profiles.validation import NumbersNotBools
from trustroute.router.options import options_of

Default = Literal["outcome", "ignore"] | float
#: The key of verdicts posted by a background evaluator (a model, not a person).
EVALUATOR_KEY = "evaluator"
#: Bounds of a key's weight: weights are relative, and these keep their sums finite.
MIN_WEIGHT = 1e-6
MAX_WEIGHT = 1e6


class KeyPolicy(NumbersNotBools):
    """How one feedback key counts: its weight in the mean and the range of its scores."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Bounded so that the weighted mean of any keys' verdicts stays a finite number.
    weight: float = Field(default=1.0, ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)
    #: ``[low, high]`` of the scores this key gives; mapped linearly onto [0, 1].
    scale: tuple[float, float] = (0.0, 1.0)
    #: Whether verdicts count in the trust layer's human score (None: every key but
    #: ``evaluator``, which is a model's verdict, not a person's).
    human: bool | None = None

    @field_validator("scale")
    @classmethod
    def _scale(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise ValueError(f"scale must be [low, high] with low < high, got {list(value)}")
        if not math.isfinite(high - low):  # scores could not be mapped onto [0, 1]
            raise ValueError(f"scale must span a finite width (high - low), got {list(value)}")
        return value


class FeedbackPolicy(NumbersNotBools):
    """When a run's quality is settled and how verdicts combine (docs/feedback.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wait_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    default: Default = "outcome"
    keys: dict[str, KeyPolicy] = Field(default_factory=dict)
    #: Executions a router keeps ready for a verdict to amend at once (its most recent;
    #: about 200 bytes each). A verdict on an older one is amended by a rebuild.
    remember: int = Field(default=100_000, ge=1)

    @field_validator("default", mode="before")
    @classmethod
    def _default(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in ("outcome", "ignore"):
            raise ValueError(f"default must be 'outcome', 'ignore' or a number in [0, 1], "
                             f"got {value!r}")
        if not isinstance(value, str):
            check_finite(value, "default", low=0.0, high=1.0)
        return value

    @classmethod
    def of(cls, value: FeedbackPolicy | Mapping[str, Any] | None) -> FeedbackPolicy:
        """The policy given as a model, a mapping or None (the defaults)."""
        return options_of(cls, value, "feedback")

    def key(self, name: str) -> KeyPolicy:
        """The policy of one key (the defaults when the key is not listed)."""
        return self.keys.get(name) or _DEFAULT_KEY

    def human(self, name: str) -> bool:
        """Whether verdicts under key ``name`` count in the human score."""
        flag = self.key(name).human
        return name != EVALUATOR_KEY if flag is None else flag

    def normalise(self, name: str, score: float) -> float:
        """A score under key ``name`` mapped onto [0, 1]; ValueError (one line) when it
        is not a finite number within the key's scale."""
        low, high = self.key(name).scale
        value = check_finite(score, "score")  # not a number, or not finite: that alone
        try:
            check_finite(value, "score", low=low, high=high)
        except ValueError as exc:  # out of the scale: say which key, and where it is set
            given = "" if name in self.keys else ", the default; set " \
                f"feedback.keys.{name}.scale for another"
            raise ValueError(f"{exc} (key {name!r}: scale [{low:g}, {high:g}]{given})") \
                from None
        return (value - low) / (high - low)

    def combine(self, verdicts: Mapping[str, float]) -> float:
        """The weighted mean of each key's latest verdict (values in [0, 1])."""
        weights = {k: self.key(k).weight for k in verdicts}
        total = sum(weights.values())
        return min(1.0, max(0.0, sum(weights[k] * v for k, v in verdicts.items()) / total))

    def fallback(self, success: bool) -> float | None:
        """The quality ``default`` gives a run no verdict reached in time (None: no
        quality evidence)."""
        if self.default == "ignore":
            return None
        if self.default == "outcome":
            return 1.0 if success else 0.0
        return float(self.default)


_DEFAULT_KEY = KeyPolicy()

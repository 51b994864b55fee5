"""Parameters of the posterior strategies, validated with errors that name the key.

Every default is argued in docs/learning.md; none is fitted to a data set. Parameters
arrive from ``AgentRouter(strategy_params={...})`` or a config file's
``strategy: {name: thompson, params: {...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from trustroute.profiles.validation import NumbersNotBools
from trustroute.router.errors import RouterError
from trustroute.router.stats import Z95


class InvalidStrategyParams(RouterError, ValueError):
    """A strategy parameter is unknown, of the wrong type or out of range."""


class PosteriorParams(NumbersNotBools):
    """Knobs of the pooled, discounted Beta posterior and of how arms are ranked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # -- pooling (pseudo-observations) --------------------------------------------
    prior_strength: float = Field(default=16.0, gt=0)
    """Most pseudo-runs an agent's cross-task-type record is worth on one task type."""
    agent_prior_strength: float = Field(default=2.0, gt=0)
    """Pseudo-runs of the task-type baseline in an agent's cross-type record."""
    type_prior_strength: float = Field(default=2.0, gt=0)
    """Pseudo-runs of the global mean in a task type's baseline."""
    population_prior: bool = True
    pooling: bool = True
    """False: every pair starts from a uniform Beta(1, 1) prior (plain Thompson)."""
    robust_weight: float | None = Field(default=None, gt=0, le=1)
    """Prior weight of the pooled prior in a robust mixture with ``robust_component``
    (None or 1: the pooled prior alone). The pair's own runs move the weight."""
    robust_component: Literal["population", "uniform"] = "population"
    """The robust mixture's other component: the prior of an agent nobody has seen on
    the task type (the baseline plus the typical agent's effect), or the uniform
    Beta(1, 1) (which, where most agents are weak, makes every newcomer look better)."""

    # -- drift ---------------------------------------------------------------------
    half_life_executions: float | None = Field(default=100.0, gt=0)
    """Evidence halves every this many executions of its task type (None: never)."""
    half_life_days: float | None = Field(default=None, gt=0)
    """Evidence also halves every this many days of age at decision time (None: never)."""
    change_detection: bool = True
    """Forget an agent's evidence from before a detected change in its quality."""
    change_delta: float = Field(default=0.05, gt=0, lt=1)
    """False-alarm level of the change-point test."""
    change_window: int = Field(default=200, ge=10, le=10_000)
    """Most recent outcomes per agent the change-point test looks at."""

    # -- objective -------------------------------------------------------------------
    lambda_cost: float = Field(default=0.0, ge=0)
    """Quality given up per unit of cost per call."""
    lambda_latency: float = Field(default=0.0, ge=0)
    """Quality given up per second of mean latency."""

    # -- exploit-only ranking ----------------------------------------------------------
    exploit_only: bool = False
    """Rank by the Wilson lower bound instead of sampling (also ``router.exploit_only``)."""
    z: float = Field(default=Z95, gt=0, le=5)
    """Width of the lower confidence bound (1.96: two-sided 95%)."""
    exploration_floor: float = Field(default=0.0, ge=0, le=0.5)
    """Probability that a decision picks uniformly at random among the candidates."""

    @classmethod
    def parse(cls, strategy: str, params: Mapping[str, Any]) -> PosteriorParams:
        """Validate ``params``; InvalidStrategyParams names the strategy and the key."""
        try:
            return cls.model_validate(dict(params))
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                key = ".".join(str(p) for p in err["loc"]) or "params"
                if err["type"] == "extra_forbidden":
                    known = ", ".join(sorted(cls.model_fields))
                    problems.append(f"unknown parameter {key!r} (known: {known})")
                else:
                    problems.append(f"{key}: {err['msg']} (got {err.get('input')!r})")
            raise InvalidStrategyParams(
                f"bad parameters for strategy {strategy!r}: " + "; ".join(problems)) from None

"""Agent registry entries: who can take which tasks, how many at once, at what cost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from trustroute.profiles.records import MAX_COST, check_identifier
from trustroute.profiles.validation import NumbersNotBools, validated

ANY_TASK = "*"


class AgentSpec(NumbersNotBools):
    """One routable agent. A plain id string means: accepts every task type."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    task_types: tuple[str, ...] = (ANY_TASK,)
    max_concurrent: int = Field(default=10, ge=1)
    #: Calls started per rolling minute (None: no rate limit). Shared by every process
    #: on a server store, like max_concurrent (see router.limits).
    rpm: int | None = Field(default=None, ge=1)
    #: At most MAX_COST, the largest cost a record may hold: a larger one would make
    #: every record of the agent fail.
    cost_per_call: float | None = Field(default=None, ge=0, le=MAX_COST, allow_inf_nan=False)
    # Token prices turn an LLM agent's usage_metadata into a recorded cost (added to
    # cost_per_call when both are set); None means "no token pricing for this agent".
    price_per_1k_input_tokens: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    price_per_1k_output_tokens: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    enabled: bool = True
    description: str = ""

    @model_validator(mode="before")
    @classmethod
    def _bare_id(cls, value: Any) -> Any:
        return {"id": value} if isinstance(value, str) else value

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_identifier(value, "agent id")

    @field_validator("task_types", mode="before")
    @classmethod
    def _task_types(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = (value,)
        if not value:
            raise ValueError("task_types must name at least one task type or '*'")
        return tuple(check_identifier(t, "task type") for t in value)

    def accepts(self, task_type: str) -> bool:
        """True when this agent may be routed tasks of ``task_type``."""
        return ANY_TASK in self.task_types or task_type in self.task_types


AgentLike = str | AgentSpec | Mapping[str, Any]


def as_specs(agents: Iterable[AgentLike]) -> dict[str, AgentSpec]:
    """Normalise ids, dicts and specs into an ordered registry; duplicates are an error."""
    if isinstance(agents, str | Mapping | AgentSpec):  # one agent, not a list of them
        raise TypeError(f"agents must be a list of ids or specs, not the "
                        f"{type(agents).__name__} {agents!r}; e.g. agents=[{agents!r}]")
    registry: dict[str, AgentSpec] = {}
    for n, item in enumerate(agents):
        if not isinstance(item, AgentSpec | str | Mapping):
            raise TypeError(f"an agent must be an id, a dict or an AgentSpec, got {item!r}")
        spec = item if isinstance(item, AgentSpec) else validated(
            AgentSpec, item if isinstance(item, str) else dict(item), f"agents.{n}")
        if spec.id in registry:
            raise ValueError(f"agent {spec.id!r} is registered twice")
        registry[spec.id] = spec
    return registry

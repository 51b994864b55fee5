"""What an agent did on one task: the ``ReasoningTrace`` that trace scoring reads.

A trace is the task objective, the ordered steps (model thoughts, tool calls, tool
observations, errors), the outcome (success and how confident we are in it) and
metadata whose ``task_domain`` picks the scoring weights. The models accept the
interchange shape of the reference design too (``task={"objective": ...}``,
``error_recovery`` steps, ``tool={"name": ...}``, ``metadata.success``) so traces
produced elsewhere can be scored without conversion code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

StepType = Literal["thought", "tool_call", "observation", "error"]
STEP_TYPES: tuple[StepType, ...] = ("thought", "tool_call", "observation", "error")
DEFAULT_DOMAIN = "default"
_STEP_ALIASES = {"error_recovery": "error"}


class TraceStep(BaseModel):
    """One step of a run; ``tool`` names the tool of a tool call or its observation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: StepType
    content: str = ""
    tool: str | None = None
    input: Any = None
    step_id: int | None = None
    output_summary: str | None = None
    latency_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @field_validator("type", mode="before")
    @classmethod
    def _alias(cls, value: Any) -> Any:
        return _STEP_ALIASES.get(value, value) if isinstance(value, str) else value

    @field_validator("tool", mode="before")
    @classmethod
    def _tool_name(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            value = value.get("name")
        if isinstance(value, str) and not value.strip():
            raise ValueError("tool must be a non-empty tool name (or omitted)")
        return value


class TraceOutcome(BaseModel):
    """How the run ended: ``success`` and the confidence in that result, in [0, 1]."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    success: bool
    confidence: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    result_summary: str = ""


class TraceMetadata(BaseModel):
    """Free-form metadata; ``task_domain`` selects the scoring weights."""

    model_config = ConfigDict(frozen=True, extra="allow")

    task_domain: str = DEFAULT_DOMAIN


class ReasoningTrace(BaseModel):
    """A task objective, the steps taken, the outcome and metadata (``task_domain``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    objective: str = ""
    steps: tuple[TraceStep, ...] = ()
    outcome: TraceOutcome
    metadata: TraceMetadata = Field(default_factory=TraceMetadata)

    @model_validator(mode="before")
    @classmethod
    def _interchange_shape(cls, data: Any) -> Any:
        """Accept ``task.objective`` and ``metadata.success`` (the reference layout)."""
        if not isinstance(data, Mapping):
            return data
        data = {k: v for k, v in data.items() if k not in ("@context", "@type", "id")}
        task = data.pop("task", None)
        if task is not None and "objective" not in data:
            data["objective"] = task.get("objective", "") if isinstance(task, Mapping) else task
        metadata = data.get("metadata")
        success = metadata.get("success") if isinstance(metadata, Mapping) else None
        outcome = data.get("outcome")
        if isinstance(success, bool):
            if outcome is None:
                data["outcome"] = {"success": success}
            elif isinstance(outcome, Mapping) and "success" not in outcome:
                data["outcome"] = {**outcome, "success": success}
        return data

    @property
    def task_domain(self) -> str:
        """The domain whose weights score this trace."""
        return self.metadata.task_domain

    @property
    def success(self) -> bool:
        """Whether the run succeeded."""
        return self.outcome.success

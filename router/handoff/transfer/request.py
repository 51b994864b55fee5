"""The TransferRequest: everything a person needs to pick up a task the machine handed over.

Immutable and JSON-serialisable (``payload()``), because the same request goes to several
hooks, over HTTP, into a LangGraph interrupt and, when delivery fails, into the store.
``request_id`` is generated on the client so a retried delivery can be de-duplicated by
the receiver.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import to_jsonable_python

from trustroute.profiles.records import check_identifier, utc_now

if TYPE_CHECKING:
    from trustroute.router.decision import RoutingDecision
    from trustroute.router.handoff.confidence import ConfidenceResult


class TransferRequest(BaseModel):
    """A request to hand one task (its input) to a person, with the reason and evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    input: Any = None
    reason: str
    confidence: float | None = None
    diagnostics: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None
    decision_id: str | None = None
    task_type: str | None = None
    source: str = "handoff"
    timestamp: datetime = Field(default_factory=utc_now)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("request_id")
    @classmethod
    def _request_id(cls, value: str) -> str:
        return check_identifier(value, "request_id")

    @field_validator("run_id", "decision_id", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> Any:
        return str(value) if isinstance(value, uuid.UUID) else value

    @field_validator("task_type")
    @classmethod
    def _task_type(cls, value: str | None) -> str | None:
        return None if value is None else check_identifier(value, "task_type")

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or not 0.0 <= value <= 1.0):
            raise ValueError(f"confidence must be in [0, 1], got {value}")
        return value

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("timestamp must be timezone-aware")
        return value.astimezone(UTC)

    def payload(self) -> dict[str, Any]:
        """JSON-ready dict (datetimes as ISO text, unknown objects as their ``str``)."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        return dict(to_jsonable_python(data, fallback=str))

    @classmethod
    def from_result(
        cls, result: ConfidenceResult, *, input: Any = None, **fields: Any
    ) -> TransferRequest:
        """A request for a retrieval-confidence verdict that said "transfer"."""
        return cls(
            input=input,
            reason=result.transfer_reason or "low confidence",
            confidence=result.confidence,
            diagnostics=dict(result.diagnostics),
            **fields,
        )

    @classmethod
    def from_decision(
        cls,
        decision: RoutingDecision,
        *,
        reason: str | None = None,
        input: Any = None,
        **fields: Any,
    ) -> TransferRequest:
        """A request for a routing decision that abstained (the trust layer's ``human``)."""
        diagnostics = fields.pop("diagnostics", None) or {
            "agent_id": decision.agent_id,
            "tier": decision.tier,
            "abstained": decision.abstained,
            "strategy": decision.strategy,
            "candidates": [c.agent_id for c in decision.candidates],
        }
        return cls(
            input=input if input is not None else decision.context,
            reason=reason or decision.abstain_reason or "the router abstained",
            confidence=decision.confidence,
            diagnostics=diagnostics,
            decision_id=decision.decision_id,
            task_type=decision.task_type,
            source=fields.pop("source", "abstain"),
            **fields,
        )

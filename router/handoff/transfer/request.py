"""The TransferRequest: everything a person needs to pick up a task the machine handed over.

Immutable and JSON-serialisable (``payload()``), because the same request goes to several
hooks, over HTTP, into a LangGraph interrupt and, when delivery fails, into the store.
``request_id`` is generated on the client so a retried delivery can be de-duplicated by
the receiver.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from trustroute.profiles.records import check_identifier, utc_now
from trustroute.router.handoff.settings import Probability

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from trustroute.router.decision import RoutingDecision
    from trustroute.router.handoff.confidence import ConfidenceResult


class TransferRequest(BaseModel):
    """A request to hand one task (its input) to a person, with the reason and evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    input: Any = None
    reason: str
    confidence: Probability | None = None
    diagnostics: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = None
    decision_id: str | None = None
    task_type: str | None = None
    source: str = "handoff"
    timestamp: datetime = Field(default_factory=utc_now)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("request_id", "task_type")
    @classmethod
    def _identifier(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or (info.context or {}).get("stored"):
            return value  # a stored row is delivered as it was accepted, by older rules too
        if info.field_name == "request_id" and "." in value:  # signed as "{id}.{time}.{body}"
            raise ValueError("request_id must not contain '.' (it is the webhook-id, which "
                             "Standard Webhooks signatures separate with dots)")
        return check_identifier(value, str(info.field_name))

    @classmethod
    def from_stored(cls, row: Mapping[str, Any]) -> TransferRequest | None:
        """The request a pending row holds, identifiers not checked again (rows accepted
        before the rules tightened are still delivered); None, logged, when unreadable."""
        try:
            return cls.model_validate(row["request"], context={"stored": True})
        except ValueError as exc:
            log.error("hand-off %s: stored request unreadable, left pending: %s",
                      row.get("request_id"), exc)
            return None

    @field_validator("run_id", "decision_id", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> Any:
        return str(value) if isinstance(value, uuid.UUID) else value

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("timestamp must be timezone-aware")
        return value.astimezone(UTC)

    def payload(self) -> dict[str, Any]:
        """JSON-ready dict (datetimes as ISO text, NaN as null, unknown objects as their
        ``str``)."""
        return self.model_dump(mode="json", fallback=str)

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

"""What a dispatch produced: how each hook fared, and where the request stands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trustroute.router.handoff.transfer.request import TransferRequest


@dataclass(frozen=True, slots=True)
class HookDelivery:
    """How one hook fared with one request."""

    hook: str
    delivered: bool
    attempts: int
    error: str | None = None
    response: Any = None
    rejected: bool = False  # the receiver refused this request (``HookRejected``)
    retry_after: float | None = None  # seconds the receiver asked to wait before a retry


@dataclass(frozen=True, slots=True)
class TransferOutcome:
    """What happened to a request: per-hook deliveries so far, the hooks it is queued for
    on the background worker, and whether it is (still) stored pending."""

    request: TransferRequest
    deliveries: tuple[HookDelivery, ...] = ()
    pending: bool = False
    stored: bool = False
    queued: tuple[str, ...] = ()  # hooks delivering it in the background (rows pending)

    @property
    def delivered(self) -> bool:
        """True when at least one hook delivered and none is left pending."""
        return bool(self.deliveries) and not self.pending

    @property
    def responses(self) -> dict[str, Any]:
        """What each delivering hook returned (e.g. a person's answer), by hook name."""
        return {d.hook: d.response for d in self.deliveries if d.delivered}

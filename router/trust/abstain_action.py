"""What happens after a decision abstains: ``on_abstain`` carried out.

- ``route_anyway`` (default): nothing more; the decision is returned, flagged;
- ``raise``: release the decision's in-flight slot and raise ``Abstained``;
- ``human``: hand the decision to people through the router's transfer hooks, on a
  worker thread, because hooks may do network I/O and ``select()`` must stay fast.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from trustroute.router.decision import RoutingDecision
from trustroute.router.trust.abstention import Abstained, OnAbstain

if TYPE_CHECKING:
    from trustroute.router.handoff.transfer import TransferDispatcher

log = logging.getLogger(__name__)


class AbstainAction:
    """Carries out the ``on_abstain`` policy for abstained decisions."""

    def __init__(self, on_abstain: OnAbstain,
                 transfer: TransferDispatcher | None = None) -> None:
        self.on_abstain = on_abstain
        self.transfer = transfer
        self._executor: ThreadPoolExecutor | None = None

    def __call__(self, decision: RoutingDecision, detail: str) -> None:
        """Act on one abstained decision (raises Abstained for ``raise``)."""
        if self.on_abstain == "raise":
            decision.release()
            raise Abstained(decision, detail)
        if self.on_abstain == "human":
            if self.transfer is None:
                log.warning("on_abstain is 'human' but the router has no transfer "
                            "dispatcher; decision %s routed anyway", decision.decision_id)
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="trustroute-handoff")
            future = self._executor.submit(_hand_off, self.transfer, decision, detail)
            future.add_done_callback(_log_failure)

    def close(self) -> None:
        """Wait for hand-offs in flight and stop the worker (idempotent)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def _hand_off(transfer: TransferDispatcher, decision: RoutingDecision, detail: str) -> Any:
    """Deliver the abstained decision to people through the transfer hooks."""
    from trustroute.router.handoff.transfer import TransferRequest

    request = TransferRequest.from_decision(
        decision, reason=f"{decision.abstain_reason}: {detail}" if detail else None)
    return transfer.dispatch(request)


def _log_failure(future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:
        log.error("hand-off after abstention failed: %s", exc)

"""Re-delivering what stayed pending: the hand-off rows that a failed delivery, a crash or
an earlier process left in the store, each through the configured hook of its name.

Each hook takes its own oldest rows, so one hook whose receiver is down (and its backlog)
starves no other. A background sweep stops a hook at its first failure that says its
receiver looks down (one failed delivery per sweep, not one per row); a receiver that
answered and refused one request (``HookRejected``: a 4xx) is up, so the sweep goes on to
that hook's other rows instead of stopping at the refused one for good.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.transfer.hook import hook_name
from trustroute.router.handoff.transfer.request import TransferRequest

if TYPE_CHECKING:
    from trustroute.router.handoff.transfer.dispatcher import TransferDispatcher


def redeliver(dispatcher: TransferDispatcher, limit: int, *, before: datetime | None = None,
              skip: frozenset[str] = frozenset(), stop_at_failure: bool = False
              ) -> tuple[int, int]:
    """Deliver up to ``limit`` pending rows per configured hook (changed before ``before``,
    not in ``skip``), oldest first; returns (delivered, tried or skipped and still
    pending). ``stop_at_failure``: a hook whose receiver looks down is left for later."""
    if dispatcher.store is None:
        return 0, 0
    repo = dispatcher.store.repository(HandoffRepository)
    delivered = still = 0
    for hook in dispatcher.hooks:
        for row in repo.pending("pending", limit, hooks=[hook_name(hook)], before=before):
            request = TransferRequest.from_stored(row)
            if request is None or row["request_id"] in skip:
                still += 1
                continue
            outcome = dispatcher.deliver(request, [hook], stored=True)
            if outcome.delivered:
                delivered += 1
                continue
            still += 1
            if stop_at_failure and not any(d.rejected for d in outcome.deliveries):
                break  # its receiver looks down: the rest wait for the next sweep
    return delivered, still

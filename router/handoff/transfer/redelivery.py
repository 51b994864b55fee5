"""Re-delivering what stayed pending: the hand-off rows that a failed delivery, a crash or
an earlier process left in the store, each through the configured hook of its name.

Each hook takes its own rows, so one hook whose receiver is down (and its backlog)
starves no other. A background sweep takes the rows unchanged for an interval by the
database's clock, least recently tried first, and claims each before trying it
(``HandoffClaims``: at most one claimer wins), so sweeps of several workers do not send
the same row at once. It stops a
hook at its first failure that says its receiver looks down (one failed delivery per
sweep, not one per row); a receiver that answered and refused one request
(``HookRejected``: a 4xx) is up, so the sweep goes on to that hook's other rows, and the
refused row waits its turn behind rows not tried for longer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustroute.profiles.store.handoff_claims import HandoffClaims
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.transfer.hook import hook_name
from trustroute.router.handoff.transfer.request import TransferRequest

if TYPE_CHECKING:
    from trustroute.router.handoff.transfer.dispatcher import TransferDispatcher


def redeliver(dispatcher: TransferDispatcher, limit: int, *,
              unchanged_s: float | None = None, skip: frozenset[str] = frozenset()
              ) -> tuple[int, int]:
    """Deliver up to ``limit`` pending rows per configured hook, not in ``skip``; returns
    (delivered, tried or skipped and still pending). ``unchanged_s``: a sweep's, rows
    unchanged that long, a hook left at its first sign of a receiver down; None: every
    pending row, oldest first (``trustroute handoffs --retry``)."""
    if dispatcher.store is None:
        return 0, 0
    repo = dispatcher.store.repository(HandoffRepository)
    claims = dispatcher.store.repository(HandoffClaims)
    if unchanged_s is not None:
        claims.collect()
    delivered = still = 0
    for hook in dispatcher.hooks:
        name = hook_name(hook)
        if unchanged_s is not None and getattr(hook, "gone", False):
            continue  # its endpoint answered 410 Gone: its rows wait, untried (no flood)
        rows = repo.pending("pending", limit, hooks=[name]) if unchanged_s is None else \
            repo.due(name, unchanged_s, limit)
        for row in rows:
            request = TransferRequest.from_stored(row)
            if request is None or row["request_id"] in skip:
                still += 1
                continue
            if not claims.take(row["request_id"], name, unchanged_s or 0.0):
                continue  # another process's sweep took it, or it moved on meanwhile
            outcome = dispatcher.deliver(request, [hook], stored=True)
            if outcome.delivered:
                delivered += 1
                continue
            still += 1
            if unchanged_s is not None and not any(d.rejected for d in outcome.deliveries):
                break  # its receiver looks down: the rest wait for the next sweep
    return delivered, still

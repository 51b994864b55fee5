"""The trust layer's hand-offs, delivered by their dispatcher's background worker.

``select()`` must stay fast and hooks may do network I/O, so a router that abstains with
``on_abstain: human`` stores the request first (on the caller's thread) and queues it on
the dispatcher's worker (``router/handoff/transfer/background.py``, which also retries
what stayed pending); ``close()`` waits for deliveries at most the dispatcher's
``dispatch_close_timeout_s``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest

log = logging.getLogger(__name__)


class HandoffWorker:
    """Queues stored hand-off requests on their dispatcher's worker; ``close`` closes the
    dispatchers it used (bounded), after which requests stay pending undelivered."""

    def __init__(self, transfer: TransferDispatcher | None = None) -> None:
        # the router's dispatcher is closed with it, whoever queued on it (HandoffRunnable)
        self._transfers: dict[int, TransferDispatcher] = {}
        if transfer is not None:
            self._transfers[id(transfer)] = transfer
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, transfer: TransferDispatcher, request: TransferRequest,
               hooks: list[Any] | None = None) -> None:
        """Deliver ``request`` (already ``accept``ed) through ``transfer`` (its hooks, or
        ``hooks``) in the background."""
        with self._lock:
            if self._closed:
                log.warning("hand-off %s stored pending: the router is closed, it is not "
                            "delivered now", request.request_id)
                return
            self._transfers[id(transfer)] = transfer
        transfer.deliver_later(request, hooks)

    def close(self, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` for the deliveries, then stop the workers."""
        with self._lock:
            transfers, self._closed = list(self._transfers.values()), True
        for transfer in transfers:
            transfer.close(timeout_s)

"""Delivering stored hand-off requests on one worker thread.

``select()`` must stay fast and hooks may do network I/O, so a router that abstains with
``on_abstain: human`` stores the request first (on the caller's thread) and queues it
here; ``close()`` waits for deliveries at most the dispatcher's
``dispatch_close_timeout_s``.
"""

from __future__ import annotations

import logging
import queue
import threading

from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest

log = logging.getLogger(__name__)


class HandoffWorker:
    """One daemon thread delivering stored hand-off requests in order. Daemon, so a hook
    that hangs delays neither ``close()`` past its bound nor the interpreter's exit: the
    request was stored before it was queued and stays pending."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[TransferDispatcher, TransferRequest] | None] = (
            queue.Queue())
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, transfer: TransferDispatcher, request: TransferRequest) -> None:
        with self._lock:
            if self._closed:
                log.warning("hand-off %s stored pending: the router is closed, it is not "
                            "delivered now", request.request_id)
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="trustroute-handoff")
                self._thread.start()
            self._queue.put((transfer, request))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                item[0].deliver(item[1])
            except Exception as exc:  # the worker must outlive a failing hook
                log.error("hand-off %s after abstention failed (it stays pending): %s",
                          item[1].request_id, exc)

    def close(self, timeout_s: float) -> None:
        with self._lock:
            thread, self._closed = self._thread, True
        if thread is None:
            return
        self._queue.put(None)  # after everything queued: deliver what fits in the bound
        thread.join(timeout_s)
        if thread.is_alive():
            log.warning("close(): hand-off deliveries still running after %.1f s; what they "
                        "did not deliver stays pending (trustroute handoffs --retry)",
                        timeout_s)

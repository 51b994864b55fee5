"""Background delivery: a dispatcher's hand-offs delivered off the caller's thread.

The request is already stored pending (``TransferDispatcher.accept``) when it is queued
here, so the caller never waits for a hook, and nothing queued is lost when the process
ends: what the worker did not deliver stays pending in the store. One daemon thread per
dispatcher delivers the queue in order and, every ``dispatch_retry_interval_s``, tries
again what stayed pending in the store for its hooks (failures of this process, rows
left by an earlier one), oldest first; such a sweep stops trying a hook at its first
failure, so a receiver that is down costs one failed delivery per sweep, not one per row.
A store that cannot be reached is retried at the next sweep (a warning when sweeps start
failing, one when they work again); a store that was closed ends the sweeps quietly.
Each sweep first stores pending what the dispatcher had to keep in memory (its
``undelivered``: a hand-off accepted while the store could not be reached whose hook
failed too), so a sweep delivers it and it outlives the process.

The queue is bounded (``dispatch_queue_size``): when it is full, as during a long outage,
a request is not queued but stays pending for the next sweep, so memory stays bounded.
``close`` waits at most ``dispatch_close_timeout_s`` for the queue; a hook that hangs
holds neither ``close`` nor the interpreter's exit (daemon thread), and at exit every
running worker gets the same bounded wait.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trustroute.profiles.store.handoff_claims import HandoffClaims
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.drain import drained
from trustroute.router.handoff.transfer.hook import hook_name
from trustroute.router.handoff.transfer.request import TransferRequest

if TYPE_CHECKING:
    from trustroute.router.handoff.transfer.dispatcher import TransferDispatcher

log = logging.getLogger(__name__)

_running: weakref.WeakSet[BackgroundDelivery] = weakref.WeakSet()
#: The error a kept request is stored with (the hook's own error was in the log).
KEPT = "not delivered; kept in memory while the store could not be reached"


@dataclass(frozen=True, slots=True)
class _Job:
    """One stored request to deliver to some of the dispatcher's hooks."""

    request: TransferRequest
    hooks: tuple[Any, ...]
    stored: bool  # accept stored it (a failure the store cannot take leaves it there)


class BackgroundDelivery:
    """A dispatcher's delivery thread: its queue, its periodic retries, its bounded close."""

    def __init__(self, dispatcher: TransferDispatcher) -> None:
        self._dispatcher = dispatcher
        self._queue: queue.Queue[_Job | None] = queue.Queue(
            dispatcher.settings.dispatch_queue_size
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._queued: set[str] = set()  # request ids queued or in delivery (sweeps skip them)
        self._full_warned = False
        self._sweep_failing = False  # warned once when sweeps start failing, not each time

    def submit(self, request: TransferRequest, hooks: Sequence[Any], stored: bool = False
               ) -> bool:
        """Queue ``request`` for ``hooks``; False when it could not be (the queue is full):
        it stays pending for the next sweep or ``trustroute handoffs --retry``."""
        with self._lock:
            self._ensure_running()
            try:
                self._queue.put_nowait(_Job(request, tuple(hooks), stored))
            except queue.Full:
                if not stored:  # not in the store either: kept until a sweep stores it
                    self._keep(request, hooks)
                if not self._full_warned:
                    log.warning(
                        "hand-off queue full (%d): %s and later requests stay pending for the "
                        "next background retry", self._queue.maxsize, request.request_id)
                    self._full_warned = True
                return False
            self._full_warned = False
            self._queued.add(request.request_id)
            return True

    def start(self, first_sweep_s: float = 0.0) -> None:
        """Start the worker now (else the first ``submit`` does); its first sweep comes
        ``first_sweep_s`` from now."""
        with self._lock:
            self._ensure_running(first_sweep_s)

    def _ensure_running(self, first_sweep_s: float = 0.0) -> None:
        """Under the lock: a new thread with its own queue unless one is running (a
        closed one's thread may still be in a hook)."""
        if self._thread is not None and self._thread.is_alive() and not self._stop.is_set():
            return
        self._stop = threading.Event()
        self._queue = queue.Queue(self._queue.maxsize)
        self._thread = threading.Thread(
            target=self._run, args=(self._stop, self._queue, first_sweep_s), daemon=True,
            name="trustroute-handoff",
        )
        self._thread.start()
        _running.add(self)

    def _run(self, stop: threading.Event, jobs: queue.Queue[_Job | None],
             first_sweep_s: float) -> None:
        interval = self._dispatcher.settings.dispatch_retry_interval_s
        # soon after start: what an earlier process left pending
        next_sweep = time.monotonic() + first_sweep_s
        while not stop.is_set():
            if interval > 0 and time.monotonic() >= next_sweep:
                if self._store_closed():  # for good: no sweep can work again
                    log.debug("hand-off store closed: background retries stop")
                    break
                self._sweep(interval)
                next_sweep = time.monotonic() + interval
            wait = max(0.0, next_sweep - time.monotonic()) if interval > 0 else None
            try:
                job = jobs.get(timeout=wait)
            except queue.Empty:
                continue
            if job is None:
                jobs.task_done()
                break
            try:
                hooks = self._untaken(job) if not stop.is_set() else ()
                if hooks:
                    self._dispatcher.deliver(job.request, hooks, stored=job.stored)
            except Exception as exc:  # the worker must outlive a failing hook or store
                log.error("hand-off %s: background delivery failed (it stays pending): %s: %s",
                          job.request.request_id, type(exc).__name__, exc)
            finally:
                with self._lock:
                    self._queued.discard(job.request.request_id)
                jobs.task_done()

    def _untaken(self, job: _Job) -> tuple[Any, ...]:
        """The job's hooks whose row this delivery takes (``HandoffClaims.take_new``): a
        sweep of another process that took one while the job waited here delivers it."""
        store = self._dispatcher.store
        if not job.stored or store is None:
            return job.hooks
        claims = store.repository(HandoffClaims)
        return tuple(h for h in job.hooks if claims.take_new(job.request.request_id,
                                                             hook_name(h)))

    def _store_closed(self) -> bool:
        store = self._dispatcher.store
        return store is not None and store.closed

    def _sweep(self, interval: float) -> None:
        with self._lock:
            skip = frozenset(self._queued)
        try:
            self._store_kept()
            self._dispatcher.retry_stale(interval, skip)
        except Exception as exc:
            # a warning when sweeps start failing (every interval would flood the log)
            level = logging.DEBUG if self._sweep_failing else logging.WARNING
            self._sweep_failing = True
            log.log(level, "background retry of pending hand-offs failed (they stay pending "
                    "and are retried every %g s): %s: %s", interval, type(exc).__name__, exc)
            return
        if self._sweep_failing:
            self._sweep_failing = False
            log.warning("background retry of pending hand-offs works again")

    def _keep(self, request: TransferRequest, hooks: Sequence[Any]) -> None:
        """Keep a request the store does not hold in the dispatcher's ``undelivered``."""
        self._dispatcher.undelivered.extend((request, hook_name(h)) for h in hooks)

    def _store_kept(self) -> None:
        """Store pending each request the dispatcher keeps in memory only (the store could
        not take it when it was accepted, nor when its hook failed); a later sweep
        delivers it once it is due. Raises when the store still cannot be reached."""
        dispatcher = self._dispatcher
        if dispatcher.store is None or not dispatcher.undelivered:
            return
        repo = dispatcher.store.repository(HandoffRepository)
        for kept in list(dispatcher.undelivered):
            request, hook = kept
            repo.save_pending(request.payload(), hook=hook, error=KEPT)
            with contextlib.suppress(ValueError):  # close() and a sweep may both store it
                dispatcher.undelivered.remove(kept)
            log.warning("hand-off %s (hook %s), kept in memory while the store could not be "
                        "reached, is stored pending now", request.request_id, hook)

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until everything queued was delivered or given up; False on timeout."""
        return drained(self._queue, timeout_s)

    def close(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` for the queue and a sweep's delivery in flight, then
        stop the thread; what it did not deliver stays pending. A queued request the store
        could not take is not dropped: it is stored now (one store call, bounded by the
        store's own budget) or stays in ``undelivered``. True when everything queued, and
        the sweep, was done."""
        with self._lock:
            thread, closed = self._thread, self._stop.is_set()
        if thread is None:
            return True
        if closed:  # closed before: only the delivery running then can be left to wait for
            thread.join(timeout_s)
            return not thread.is_alive()
        deadline = time.monotonic() + timeout_s
        done = self.join(timeout_s)
        with self._lock:
            self._stop.set()
            self._queued.clear()
            while True:  # drop what is left: it is stored pending, or kept (below)
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    self._queue.task_done()
                    if not job.stored:  # accept could not store it: never drop it
                        self._keep(job.request, job.hooks)
            self._queue.put_nowait(None)  # wake the thread if it waits
            _running.discard(self)
        try:  # what close() kept: stored now if the store answers (else logged, below)
            self._store_kept()
        except Exception as exc:
            log.error("close(): %d hand-off(s) the store could not take stay in memory only "
                      "(dispatcher.undelivered): %s: %s", len(self._dispatcher.undelivered),
                      type(exc).__name__, exc)
        # a sweep runs on the thread, not through the queue: let the one running finish
        if thread is not threading.current_thread():  # a hook may close its own router
            thread.join(max(0.0, deadline - time.monotonic()))
        done = done and not thread.is_alive()
        if not done:
            log.warning("close(): hand-off deliveries still running after %.1f s; what they "
                        "did not deliver stays pending (trustroute handoffs --retry)",
                        timeout_s)
        return done


@atexit.register
def _close_all() -> None:
    """At exit, give each running worker its bounded wait (undelivered rows stay pending)."""
    for worker in list(_running):
        worker.close(worker._dispatcher.settings.dispatch_close_timeout_s)

"""TransferDispatcher: deliver a TransferRequest to every hook, and never lose it.

Stored first, then delivered: ``accept`` writes the request to the store as *pending*, one
row per hook, before any hook is tried, so a process killed mid-delivery (or before it)
leaves it where ``trustroute handoffs`` lists it and ``retry_pending`` tries again
(``redelivery.py``).
``dispatch`` is ``accept`` then delivery: by default (``delivery: background``) the hooks
run on the dispatcher's worker thread (``background.py``) and the caller gets the outcome
at once; hooks whose answer the caller waits for (``returns_human_response``) or that
raise control flow (``passthrough``: the LangGraph interrupt) always run on the caller's
thread. ``delivery: sync`` runs every hook on the caller's thread. Each hook is tried
with tenacity retries (exponential backoff) independently; one failing hook does not stop
the others. A row's status only moves forward (pending -> delivered -> resolved, compare
and set in the store): a hook that delivers marks its row delivered; one that still
fails records its error on the row only while it is pending, so a late failure never
reopens a row a racing retry delivered or a person resolved. With no hooks at all the
request stays pending: a hand-off that reaches nobody must at least be visible. Without a
store (or when the store fails) an undelivered request is logged at ERROR level and kept
in ``undelivered``, until the background worker's next sweep can store it pending. A
request can still reach a hook twice (killed after the hook answered, before the mark; a
``--retry`` racing a delivery): receivers de-duplicate on ``request_id``.

Control-flow exceptions a hook declares in ``passthrough`` (LangGraph's interrupt) are
re-raised at once: pausing a graph for a person is the hook working, not failing.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from trustroute.profiles.records import check_identifier
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer.background import BackgroundDelivery
from trustroute.router.handoff.transfer.hook import (
    HookRejected,
    acall_hook,
    call_hook,
    hook_name,
    inline_hook,
    passthrough_of,
)
from trustroute.router.handoff.transfer.outcome import HookDelivery, TransferOutcome
from trustroute.router.handoff.transfer.redelivery import redeliver
from trustroute.router.handoff.transfer.request import TransferRequest

if TYPE_CHECKING:
    from trustroute.profiles.store import Store

log = logging.getLogger(__name__)

NO_HOOK = "(no hook)"
NO_HOOKS_ERROR = "no transfer hooks configured"
NOT_YET = "not delivered yet (stored before delivery)"


class TransferDispatcher:
    """Runs transfer hooks sync or async, retries them, and stores what still fails.

    ``settings`` is the config file's ``handoff:`` section (``HandoffSection``), whose
    ``delivery`` and ``dispatch_*`` fields say how it delivers; ``attempts``,
    ``backoff_s``, ``max_backoff_s`` and ``delivery`` given here override them.
    """

    def __init__(
        self,
        hooks: Iterable[Any] = (),
        *,
        store: Store | None = None,
        attempts: int | None = None,
        backoff_s: float | None = None,
        max_backoff_s: float | None = None,
        settings: HandoffSection | None = None,
        delivery: str | None = None,
    ) -> None:
        given = {
            "dispatch_attempts": attempts,
            "dispatch_backoff_s": backoff_s,
            "dispatch_max_backoff_s": max_backoff_s,
            "delivery": delivery,
        }
        base = (settings or HandoffSection()).model_dump(exclude_unset=True)
        self.settings = HandoffSection.model_validate(
            {**base, **{k: v for k, v in given.items() if v is not None}})
        self.hooks: list[Any] = []
        for hook in hooks:
            self.add_hook(hook)
        self.store = store
        self.undelivered: list[tuple[TransferRequest, str]] = []
        self._background = BackgroundDelivery(self)

    @property
    def attempts(self) -> int:
        """Tries per hook (a hook's own ``dispatch_attempts`` wins)."""
        return self.settings.dispatch_attempts

    def __repr__(self) -> str:
        return f"TransferDispatcher(hooks={[hook_name(h) for h in self.hooks]})"

    def add_hook(self, hook: Any) -> None:
        """Add a hook (any callable taking a TransferRequest)."""
        if not callable(hook):
            raise TypeError(f"a transfer hook must be callable, got {type(hook).__name__}")
        check_identifier(hook_name(hook), "hook name")  # kept with each pending row
        self.hooks.append(hook)

    def bind_store(self, store: Store) -> None:
        """Use ``store`` for pending requests unless one was given explicitly, and (with
        hooks and a retry interval) start the worker, whose first sweep retries what an
        earlier or crashed process left pending, without waiting for a new hand-off."""
        if self.store is None:
            self.store = store
        if self.hooks and (interval := self.settings.dispatch_retry_interval_s) > 0:
            # at a random moment of the first interval: workers started together (a
            # deploy) do not all sweep the same rows at once; the first to try a row
            # marks it, and the others leave it for an interval
            self._background.start(random.uniform(0.0, interval))

    def _ordered(self) -> list[Any]:
        return sorted(self.hooks, key=lambda h: bool(getattr(h, "runs_last", False)))

    def _retry_options(self, hook: Any) -> dict[str, Any]:
        own = getattr(hook, "dispatch_attempts", None)
        # ordinary errors; never control flow (passthrough, Ctrl-C, cancellation)
        retryable = retry_if_exception_type(Exception) & \
            retry_if_not_exception_type(passthrough_of(hook))
        return {
            "stop": stop_after_attempt(own if isinstance(own, int) and own >= 1 else self.attempts),
            "wait": wait_exponential(multiplier=self.settings.dispatch_backoff_s,
                                     max=self.settings.dispatch_max_backoff_s),
            "retry": retryable,
            "reraise": True,
        }

    # -- delivery ------------------------------------------------------------------------
    def _deliver(self, hook: Any, request: TransferRequest) -> HookDelivery:
        retrying = Retrying(**self._retry_options(hook))
        caught: tuple[type[BaseException], ...] = (Exception, *passthrough_of(hook))
        try:
            response: Any = retrying(call_hook, hook, request)
        except caught as exc:
            return self._delivery(hook, request, retrying.statistics["attempt_number"],
                                  error=exc)
        return self._delivery(hook, request, retrying.statistics["attempt_number"], response)

    async def _adeliver(self, hook: Any, request: TransferRequest) -> HookDelivery:
        retrying = AsyncRetrying(**self._retry_options(hook))
        caught: tuple[type[BaseException], ...] = (Exception, *passthrough_of(hook))
        response: Any = None
        error: BaseException | None = None
        try:
            response = await retrying(acall_hook, hook, request)
        except caught as exc:
            error = exc
        # tenacity counts attempts per thread: read here; marking the store is off the loop
        return await asyncio.to_thread(self._delivery, hook, request,
                                       retrying.statistics["attempt_number"], response, error)

    def _mark_delivered(self, request: TransferRequest, hook: str, attempts: int) -> None:
        if self.store is None:
            return
        try:
            self.store.repository(HandoffRepository).mark_delivered(
                request.request_id, hook, attempts
            )
        except Exception as exc:  # delivered all the same; the row stays pending
            log.warning("hand-off %s was delivered by %s but could not be marked delivered "
                        "(a retry will deliver it again): %s: %s",
                        request.request_id, hook, type(exc).__name__, exc)

    def _delivery(
        self,
        hook: Any,
        request: TransferRequest,
        attempts: int,
        response: Any = None,
        error: BaseException | None = None,
    ) -> HookDelivery:
        name = hook_name(hook)
        paused = isinstance(error, passthrough_of(hook))  # control flow: the hook working
        if error is None or paused:
            self._mark_delivered(request, name, attempts)
        if error is None:
            return HookDelivery(name, True, attempts, response=response)
        if paused:
            raise error
        text = f"{type(error).__name__}: {error}"
        if getattr(hook, "dispatch_attempts", None) == 1:  # it retries itself and says so
            log.warning("transfer hook %s failed: %s", name, text)
        else:
            log.warning("transfer hook %s failed after %d attempt(s): %s", name, attempts,
                        text)
        return HookDelivery(name, False, attempts, error=text,
                            rejected=isinstance(error, HookRejected),
                            retry_after=getattr(error, "retry_after", None))

    def _prepared(self, request: TransferRequest, hooks: list[Any]) -> TransferRequest:
        """The request every hook receives: each hook's ``prepare_request`` may settle it
        (the LangGraph hook gives it an id that stays the same when its node re-runs)."""
        for hook in hooks:
            prepare = getattr(hook, "prepare_request", None)
            if not callable(prepare):
                continue
            try:
                request = prepare(request)
            except Exception as exc:  # never lose the request over it: deliver it as it is
                log.warning("transfer hook %s could not prepare %s: %s: %s",
                            hook_name(hook), request.request_id, type(exc).__name__, exc)
        return request

    def accept(self, request: TransferRequest, hooks: Iterable[Any] | None = None
               ) -> TransferRequest:
        """Prepare ``request`` (see ``prepare_request``) and store it pending for every hook
        (or ``hooks``) before any delivery; returns the request to ``deliver``. Never
        raises for the store: when it fails, the request is kept in memory if delivery
        fails too."""
        return self._accept(request, self._hooks(hooks))[0]

    def _accept(self, request: TransferRequest, hooks: list[Any] | None = None
                ) -> tuple[TransferRequest, set[str], bool]:
        """The prepared request, the hooks whose row is pending (a request accepted before
        keeps its delivered rows) and whether the store holds it."""
        hooks = self._ordered() if hooks is None else hooks
        request = self._prepared(request, hooks)
        names = [hook_name(h) for h in hooks]
        if self.store is None:
            return request, set(names), False
        waiting = set()
        try:  # the repository too: its first use defines its tables (a request)
            repo = self.store.repository(HandoffRepository)
            for name in names or [NO_HOOK]:
                status = repo.save_pending(
                    request.payload(), hook=name, error=NOT_YET if names else NO_HOOKS_ERROR
                )
                if status == "pending":
                    waiting.add(name)
        except Exception as exc:
            log.error("hand-off %s could not be stored before delivery: %s: %s",
                      request.request_id, type(exc).__name__, exc)
            return request, set(names), False
        return request, waiting, True

    def _hooks(self, hooks: Iterable[Any] | None) -> list[Any]:
        return self._ordered() if hooks is None else list(hooks)

    def deliver(self, request: TransferRequest, hooks: Iterable[Any] | None = None, *,
                stored: bool = False) -> TransferOutcome:
        """Deliver an ``accept``ed request to every hook (or to ``hooks``), blocking: each
        delivery is marked delivered, each failure stays pending with its error
        (``stored``: accept stored it, so a failure the store cannot take leaves it there)."""
        deliveries = tuple(self._deliver(h, request) for h in self._hooks(hooks))
        return self._settle(request, deliveries, stored=stored)

    async def adeliver(self, request: TransferRequest, hooks: Iterable[Any] | None = None,
                       *, stored: bool = False) -> TransferOutcome:
        """Async ``deliver``: async hooks awaited, sync ones and the store's writes run in
        worker threads."""
        deliveries = tuple([await self._adeliver(h, request) for h in self._hooks(hooks)])
        return await asyncio.to_thread(self._settle, request, deliveries, stored=stored)

    def deliver_later(self, request: TransferRequest, hooks: Iterable[Any] | None = None
                      ) -> bool:
        """Queue an ``accept``ed request for the background worker (every hook, or
        ``hooks``); False when the queue is full (it stays pending for a later retry)."""
        return self._background.submit(request, self._hooks(hooks))

    def _split(self, waiting: set[str]) -> tuple[list[Any], list[Any]]:
        """(hooks to run on the caller's thread, hooks for the background worker). Inline
        hooks always run (the LangGraph hook returns the person's answer on resume);
        the others only while their row is pending."""
        due = [h for h in self._ordered() if inline_hook(h) or hook_name(h) in waiting]
        if self.settings.delivery == "sync":
            return due, []
        return [h for h in due if inline_hook(h)], [h for h in due if not inline_hook(h)]

    def _queue(self, request: TransferRequest, later: list[Any], stored: bool
               ) -> tuple[str, ...]:
        if later and self._background.submit(request, later, stored):
            return tuple(hook_name(h) for h in later)
        return ()

    def dispatch(self, request: TransferRequest) -> TransferOutcome:
        """Store ``request`` pending, then deliver it: in the background by default (the
        outcome lists the ``queued`` hooks), inline hooks and ``delivery: sync`` here.

        The outcome's ``request`` is the one delivered (see ``prepare_request``)."""
        request, waiting, stored = self._accept(request)
        inline, later = self._split(waiting)
        queued = self._queue(request, later, stored)
        deliveries = tuple(self._deliver(h, request) for h in inline)
        return self._settle(request, deliveries, queued, len(later) > len(queued), stored)

    async def adispatch(self, request: TransferRequest) -> TransferOutcome:
        """Async ``dispatch``: async hooks awaited, sync ones and the store's writes run in
        worker threads."""
        request, waiting, stored = await asyncio.to_thread(self._accept, request)
        inline, later = self._split(waiting)
        queued = self._queue(request, later, stored)
        deliveries = tuple([await self._adeliver(h, request) for h in inline])
        return await asyncio.to_thread(self._settle, request, deliveries, queued,
                                       len(later) > len(queued), stored)

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until the background worker has tried everything queued; False on timeout."""
        return self._background.join(timeout_s)

    def close(self, timeout_s: float | None = None) -> bool:
        """Wait for background deliveries at most ``timeout_s`` (default
        ``dispatch_close_timeout_s``) and stop the worker; what it did not deliver stays
        pending. A later ``dispatch`` starts a new worker. True when all were tried."""
        bound = self.settings.dispatch_close_timeout_s if timeout_s is None else timeout_s
        return self._background.close(bound)

    def _settle(self, request: TransferRequest, deliveries: Sequence[HookDelivery],
                queued: tuple[str, ...] = (), left: bool = False, stored: bool = True
                ) -> TransferOutcome:
        failed = [d for d in deliveries if not d.delivered]
        if not deliveries and not queued and not left and not self.hooks:
            failed = [HookDelivery(NO_HOOK, False, 0, error=NO_HOOKS_ERROR)]
        # a list, not a generator: every failed hook's request is kept, not just the first
        kept = all([self._store_pending(request, d, stored) for d in failed])
        pending = bool(failed or queued or left)
        return TransferOutcome(request, tuple(deliveries), pending=pending,
                               stored=pending and kept and (stored or bool(failed)),
                               queued=queued)

    def _store_pending(self, request: TransferRequest, delivery: HookDelivery,
                       stored: bool) -> bool:
        error = delivery.error or "undelivered"
        if self.store is not None:
            try:
                repo = self.store.repository(HandoffRepository)
                # stored already unless accept could not store it; then only while pending
                if repo.save_pending(request.payload(), hook=delivery.hook, error=error) == (
                    "pending"
                ):
                    repo.mark_failed(request.request_id, delivery.hook, error=error,
                                     attempts=delivery.attempts,
                                     retry_after_s=delivery.retry_after)
                return True
            except Exception as exc:  # the store itself failed: fall through, keep it
                if stored:  # its rows are there already, pending: only this error is lost
                    log.warning("hand-off %s: %s failed (%s); the failure could not be "
                                "recorded (%s), the request stays pending in the store",
                                request.request_id, delivery.hook, error, exc)
                    return True
                error = f"{error}; storing it failed too: {exc}"
        self.undelivered.append((request, delivery.hook))  # list.append is thread-safe
        log.error("hand-off %s could not be delivered by %s and is kept in memory only: %s",
                  request.request_id, delivery.hook, error)
        return False

    # -- pending -----------------------------------------------------------------------
    def pending(self, limit: int = 100) -> list[dict[str, Any]]:
        """Stored requests still waiting for delivery (oldest first)."""
        if self.store is None:
            return []
        return self.store.repository(HandoffRepository).pending("pending", limit)

    def retry_pending(self, limit: int = 100) -> tuple[int, int]:
        """Re-deliver stored pending requests through the hook of the same name, oldest
        first: up to ``limit`` rows per configured hook (``redelivery``).

        Returns (delivered, still pending); still pending counts every pending row,
        those of hooks no longer configured too (``unconfigured_pending`` counts them per
        hook; ``trustroute handoffs --resolve`` closes them).
        """
        delivered, _ = redeliver(self, limit)
        if self.store is None:
            return delivered, 0
        return delivered, sum(self.store.repository(HandoffRepository).pending_by_hook().values())

    def retry_stale(self, older_than_s: float, skip: frozenset[str] = frozenset(),
                    limit: int = 100) -> tuple[int, int]:
        """The background worker's retry (``redelivery``): pending rows of configured hooks
        unchanged for ``older_than_s``, not in ``skip``; a hook whose receiver looks down
        is left at its first failure."""
        return redeliver(self, limit, unchanged_s=older_than_s, skip=skip)

    def unconfigured_pending(self) -> dict[str, int]:
        """Pending rows of hooks this dispatcher does not have, counted per hook name."""
        if self.store is None:
            return {}
        names = [hook_name(h) for h in self.hooks]
        return self.store.repository(HandoffRepository).pending_by_hook(exclude=names)

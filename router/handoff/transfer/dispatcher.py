"""TransferDispatcher: deliver a TransferRequest to every hook, and never lose it.

Stored first, then delivered: ``accept`` writes the request to the store as *pending*, one
row per hook, before any hook is tried, so a process killed mid-delivery (or before it)
leaves it where ``trustroute handoffs`` lists it and ``retry_pending`` tries again.
``deliver`` then tries each hook (with tenacity retries, exponential backoff)
independently; one failing hook does not stop the others. A hook that delivers has its
row marked *delivered* at once (one statement, by record id); one that still fails keeps
its row pending with the error. ``dispatch`` is ``accept`` then ``deliver``. With no hooks
at all the request stays pending: a hand-off that reaches nobody must at least be visible.
Without a store (or when the store fails) an undelivered request is logged at ERROR level
and kept in ``undelivered``. A request can still reach a hook twice (killed after the hook
answered, before the mark; a ``--retry`` racing a delivery): receivers de-duplicate on
``request_id``.

Control-flow exceptions a hook declares in ``passthrough`` (LangGraph's interrupt) are
re-raised at once: pausing a graph for a person is the hook working, not failing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenacity import (
    AsyncRetrying,
    BaseRetrying,
    Retrying,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer.hook import acall_hook, call_hook, hook_name, passthrough_of
from trustroute.router.handoff.transfer.request import TransferRequest

if TYPE_CHECKING:
    from trustroute.profiles.store import Store

log = logging.getLogger(__name__)

NO_HOOK = "(no hook)"
NO_HOOKS_ERROR = "no transfer hooks configured"
NOT_YET = "not delivered yet (stored before delivery)"


@dataclass(frozen=True, slots=True)
class HookDelivery:
    """How one hook fared with one request."""

    hook: str
    delivered: bool
    attempts: int
    error: str | None = None
    response: Any = None


@dataclass(frozen=True, slots=True)
class TransferOutcome:
    """What happened to a request: per-hook deliveries, and whether it was stored pending."""

    request: TransferRequest
    deliveries: tuple[HookDelivery, ...] = ()
    pending: bool = False
    stored: bool = False

    @property
    def delivered(self) -> bool:
        """True when at least one hook delivered and none is left pending."""
        return bool(self.deliveries) and not self.pending

    @property
    def responses(self) -> dict[str, Any]:
        """What each delivering hook returned (e.g. a person's answer), by hook name."""
        return {d.hook: d.response for d in self.deliveries if d.delivered}


class TransferDispatcher:
    """Runs transfer hooks sync or async, retries them, and stores what still fails.

    ``settings`` is the config file's ``handoff:`` section (``HandoffSection``), whose
    ``dispatch_*`` fields are the retries; ``attempts``, ``backoff_s`` and
    ``max_backoff_s`` given here override them.
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
    ) -> None:
        given = {
            "dispatch_attempts": attempts,
            "dispatch_backoff_s": backoff_s,
            "dispatch_max_backoff_s": max_backoff_s,
        }
        base = (settings or HandoffSection()).model_dump(exclude_unset=True)
        self.settings = HandoffSection.model_validate(
            {**base, **{k: v for k, v in given.items() if v is not None}}
        )
        self.hooks: list[Any] = []
        for hook in hooks:
            self.add_hook(hook)
        self.store = store
        self.undelivered: list[tuple[TransferRequest, str]] = []

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
        self.hooks.append(hook)

    def bind_store(self, store: Store) -> None:
        """Use ``store`` for pending requests unless one was given explicitly."""
        if self.store is None:
            self.store = store

    def _ordered(self) -> list[Any]:
        return sorted(self.hooks, key=lambda h: bool(getattr(h, "runs_last", False)))

    def _retry_options(self, hook: Any) -> dict[str, Any]:
        own = getattr(hook, "dispatch_attempts", None)
        # ordinary errors; never control flow (passthrough, Ctrl-C, cancellation)
        retryable = retry_if_exception_type(Exception) & retry_if_not_exception_type(
            passthrough_of(hook)
        )
        return {
            "stop": stop_after_attempt(own if isinstance(own, int) and own >= 1 else self.attempts),
            "wait": wait_exponential(
                multiplier=self.settings.dispatch_backoff_s,
                max=self.settings.dispatch_max_backoff_s,
            ),
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
            return self._delivery(hook, request, retrying, error=exc)
        return self._delivery(hook, request, retrying, response)

    async def _adeliver(self, hook: Any, request: TransferRequest) -> HookDelivery:
        retrying = AsyncRetrying(**self._retry_options(hook))
        caught: tuple[type[BaseException], ...] = (Exception, *passthrough_of(hook))
        try:
            response: Any = await retrying(acall_hook, hook, request)
        except caught as exc:
            return self._delivery(hook, request, retrying, error=exc)
        return self._delivery(hook, request, retrying, response)

    def _mark_delivered(self, request: TransferRequest, hook: str) -> None:
        if self.store is None:
            return
        try:
            self.store.repository(HandoffRepository).mark_delivered(request.request_id, hook)
        except Exception as exc:  # delivered all the same; the row stays pending
            log.warning(
                "hand-off %s was delivered by %s but could not be marked delivered (a retry "
                "will deliver it again): %s: %s",
                request.request_id,
                hook,
                type(exc).__name__,
                exc,
            )

    def _delivery(
        self,
        hook: Any,
        request: TransferRequest,
        retrying: BaseRetrying,
        response: Any = None,
        error: BaseException | None = None,
    ) -> HookDelivery:
        name, attempts = hook_name(hook), retrying.statistics["attempt_number"]
        paused = isinstance(error, passthrough_of(hook))  # control flow: the hook working
        if error is None or paused:
            self._mark_delivered(request, name)
        if error is None:
            return HookDelivery(name, True, attempts, response=response)
        if paused:
            raise error
        text = f"{type(error).__name__}: {error}"
        log.warning("transfer hook %s failed after %d attempt(s): %s", name, attempts, text)
        return HookDelivery(name, False, attempts, error=text)

    def _prepared(self, request: TransferRequest) -> TransferRequest:
        """The request every hook receives: each hook's ``prepare_request`` may settle it
        (the LangGraph hook gives it an id that stays the same when its node re-runs)."""
        for hook in self._ordered():
            prepare = getattr(hook, "prepare_request", None)
            if not callable(prepare):
                continue
            try:
                request = prepare(request)
            except Exception as exc:  # never lose the request over it: deliver it as it is
                log.warning(
                    "transfer hook %s could not prepare %s: %s: %s",
                    hook_name(hook),
                    request.request_id,
                    type(exc).__name__,
                    exc,
                )
        return request

    def accept(self, request: TransferRequest) -> TransferRequest:
        """Prepare ``request`` (see ``prepare_request``) and store it pending for every hook
        before any delivery; returns the request to ``deliver``. Never raises for the
        store: when it fails, the request is kept in memory if delivery fails too."""
        request = self._prepared(request)
        if self.store is None:
            return request
        names = [hook_name(h) for h in self._ordered()]
        repo = self.store.repository(HandoffRepository)
        try:
            for name in names or [NO_HOOK]:
                repo.save_pending(
                    request.payload(),
                    hook=name,
                    error=NOT_YET if names else NO_HOOKS_ERROR,
                    attempts=0,
                )
        except Exception as exc:
            log.error(
                "hand-off %s could not be stored before delivery: %s: %s",
                request.request_id,
                type(exc).__name__,
                exc,
            )
        return request

    def deliver(self, request: TransferRequest) -> TransferOutcome:
        """Deliver an ``accept``ed request to every hook (blocking): each delivery is marked
        delivered, each failure stays pending with its error."""
        deliveries = tuple(self._deliver(h, request) for h in self._ordered())
        return self._settle(request, deliveries)

    async def adeliver(self, request: TransferRequest) -> TransferOutcome:
        """Async ``deliver``: async hooks awaited, sync ones run in worker threads."""
        deliveries = tuple([await self._adeliver(h, request) for h in self._ordered()])
        return self._settle(request, deliveries)

    def dispatch(self, request: TransferRequest) -> TransferOutcome:
        """Store ``request`` pending, then deliver it to every hook (blocking).

        The outcome's ``request`` is the one delivered (see ``prepare_request``)."""
        return self.deliver(self.accept(request))

    async def adispatch(self, request: TransferRequest) -> TransferOutcome:
        """Async ``dispatch``: async hooks awaited, sync ones run in worker threads."""
        return await self.adeliver(self.accept(request))

    def _settle(
        self, request: TransferRequest, deliveries: Sequence[HookDelivery]
    ) -> TransferOutcome:
        failed = [d for d in deliveries if not d.delivered]
        if not deliveries:
            failed = [HookDelivery(NO_HOOK, False, 0, error=NO_HOOKS_ERROR)]
        # a list, not a generator: every failed hook's request is kept, not just the first
        stored = bool(failed) and all([self._store_pending(request, d) for d in failed])
        return TransferOutcome(request, tuple(deliveries), pending=bool(failed), stored=stored)

    def _store_pending(self, request: TransferRequest, delivery: HookDelivery) -> bool:
        error = delivery.error or "undelivered"
        if self.store is not None:
            try:
                self.store.repository(HandoffRepository).save_pending(
                    request.payload(), hook=delivery.hook, error=error, attempts=delivery.attempts
                )
                return True
            except Exception as exc:  # the store itself failed: fall through, keep it
                error = f"{error}; storing it failed too: {exc}"
        self.undelivered.append((request, delivery.hook))  # list.append is thread-safe
        log.error(
            "hand-off %s could not be delivered by %s and is kept in memory only: %s",
            request.request_id,
            delivery.hook,
            error,
        )
        return False

    # -- pending -----------------------------------------------------------------------
    def pending(self, limit: int = 100) -> list[dict[str, Any]]:
        """Stored requests still waiting for delivery (oldest first)."""
        if self.store is None:
            return []
        return self.store.repository(HandoffRepository).pending("pending", limit)

    def retry_pending(self, limit: int = 100) -> tuple[int, int]:
        """Re-deliver stored pending requests through the hook of the same name.

        Returns (delivered, still pending). Requests for a hook that is no longer
        configured stay pending (``trustroute handoffs --resolve`` closes them).
        """
        if self.store is None:
            return 0, 0
        repo = self.store.repository(HandoffRepository)
        by_name = {hook_name(h): h for h in self.hooks}
        delivered = still = 0
        for row in repo.pending("pending", limit):
            hook = by_name.get(row["hook"])
            if hook is None:
                still += 1
                continue
            request = TransferRequest.model_validate(row["request"])
            if self._settle(request, [self._deliver(hook, request)]).delivered:
                delivered += 1
            else:
                still += 1
        return delivered, still

"""Limits shared by every process on a server store: leases that expire unless renewed.

Against a server store each call that takes a slot (``select(..., acquire=True)``,
``RoutedRunnable``) claims a lease row of its own in the store, admitted only when the
live claims counted after it committed are within the limit (``profiles.store.leases``
has why that holds without trusting the engine's conflict detection), so
``max_concurrent`` and ``rpm`` hold across every worker, not per process. A lease
expires ``lease_ttl_s`` after it was last renewed, by the database clock; one thread per
router renews the leases it holds every ``lease_ttl_s / 3``, so a live worker must miss
two renewals in a row before it can lose one, and a SIGKILLed worker's leases come back
within ``lease_ttl_s``. ``record(decision)`` or the lease's ``release()`` frees it at once.

When the store cannot be reached, ``on_store_error`` decides: ``open`` (the default)
falls back to counting in this process, with a WARNING and ``SharedLimits.fail_opens``
counting each call started so, for one renewal period before it asks the store again;
``closed`` raises ``StoreUnavailableError`` instead. A lease that expired before it was
renewed is counted in ``SharedLimits.lost``. docs/storage.md
("Limits shared by all workers") has the argument for both and the cost per call.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from typing import Literal

from pydantic import ConfigDict, Field

from trustroute.profiles.store import Store, StoreUnavailableError
from trustroute.profiles.store.connection import RetryableConflict
from trustroute.profiles.store.errors import StoreError
from trustroute.profiles.store.leases import Claim, LeaseRepository, claim_of
from trustroute.profiles.validation import NumbersNotBools
from trustroute.router.errors import AgentAtCapacity, AgentRateLimited

log = logging.getLogger(__name__)


class LimitSettings(NumbersNotBools):
    """How ``max_concurrent`` and ``rpm`` are enforced (the ``limits`` config section)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Against a server store, share the limits between every process using it. False
    #: counts per process, as embedded stores (one process) always do.
    shared: bool = True
    #: A lease not renewed for this long is free again: how long a killed worker's slots
    #: stay taken. Renewed every third of it, so two renewals in a row must fail first;
    #: 15 s also covers a renewal that waits out store.reconnect_timeout_s (10 s).
    lease_ttl_s: float = Field(default=15.0, gt=0, allow_inf_nan=False)
    #: The store cannot be reached: "open" counts per process (WARNING) until it answers,
    #: "closed" refuses the call (StoreUnavailableError).
    on_store_error: Literal["open", "closed"] = "open"
    #: How long a "full" (or "rate limited") answer from the store is believed, and so
    #: the longest a task waiting for capacity sleeps before it asks again: a slot freed
    #: in another process is noticed within this, at up to 1/poll_s store reads per
    #: waiting task per second.
    poll_s: float = Field(default=0.25, gt=0, allow_inf_nan=False)

    @property
    def renew_every_s(self) -> float:
        """How often the leases a router holds are renewed."""
        return self.lease_ttl_s / 3


class SharedLimits:
    """Leases and rate tokens of one router, held in a server store and renewed by a
    thread of its own."""

    def __init__(self, store: Store, settings: LimitSettings) -> None:
        self.store = store
        self.settings = settings
        self._prefix = f"{socket.gethostname()}:{os.getpid()}:"
        self._repo: LeaseRepository | None = None
        self._lock = threading.Lock()
        self._live: dict[str, tuple[str, Claim]] = {}  # holder -> (agent, claim)
        self._unsure: list[Claim] = []  # claims whose take got no answer: deleted later
        self._full: dict[str, tuple[int, float]] = {}  # agent -> (held, seen at)
        self._taking: dict[str, threading.Lock] = {}  # agent -> one take at a time here
        self._limited: dict[str, float] = {}  # agent -> when the store said "no token"
        self._degraded_until = 0.0
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        #: Calls started while the store could not be reached, counted in this process
        #: only (on_store_error "open"): each one may have run beyond the shared limit.
        self.fail_opens = 0
        #: Leases that expired before their renewal reached the store (their calls ran
        #: on without a lease: the limit may have been exceeded meanwhile).
        self.lost = 0

    # -- taking and giving back -------------------------------------------------------
    def take(self, agent_id: str, limit: int, rpm: int | None) -> str | None:
        """A lease of ``agent_id`` in the store: its holder id. Raises AgentAtCapacity
        (or AgentRateLimited) when the store has none free; None means the store could
        not be reached and ``on_store_error`` is "open" (count in this process)."""
        if time.monotonic() < self._degraded_until:
            self._unreachable(None)
            return None
        with self._lock:
            taking = self._taking.setdefault(agent_id, threading.Lock())
        with taking:  # threads of one process never race each other for a slot
            if self.held(agent_id) >= limit:  # the store said "full" to another just now
                raise AgentAtCapacity(agent_id, limit)
            if rpm is not None and self.rate_limited(agent_id):
                raise AgentRateLimited(agent_id, rpm)
            return self._take(agent_id, limit, rpm)

    def _take(self, agent_id: str, limit: int, rpm: int | None) -> str | None:
        holder = self._prefix + uuid.uuid4().hex
        try:
            taken = self._repository().take(agent_id, limit, rpm, holder,
                                            self.settings.lease_ttl_s)
        except RetryableConflict:  # every try lost to other writers: busy right now
            self._full[agent_id] = (limit, time.monotonic())
            raise AgentAtCapacity(agent_id, limit) from None
        except StoreUnavailableError as exc:
            # the claim may have been stored without an answer: delete it once the
            # store answers again (until then it holds a slot for at most lease_ttl_s)
            with self._lock:
                self._unsure.append(claim_of(agent_id, holder))
            self._start_renewer()
            self._unreachable(exc)
            return None
        if taken.claim is None:
            if taken.limited:
                self._limited[agent_id] = time.monotonic()
                raise AgentRateLimited(agent_id, rpm or 0)
            # takers that raced for the last slot all withdrew: each believes "full"
            # for a random part of poll_s, so they do not all come back at once again
            jitter = random.uniform(0, self.settings.poll_s) if taken.contended else 0.0
            self._full[agent_id] = (limit, time.monotonic() - jitter)
            raise AgentAtCapacity(agent_id, limit)
        with self._lock:
            self._live[holder] = (agent_id, taken.claim)
        self._start_renewer()
        return holder

    def release(self, holder: str) -> None:
        """Give a lease back at once (it would expire anyway: a failure only logs)."""
        with self._lock:
            live = self._live.pop(holder, None)
            if live is None:
                return
            agent_id, claim = live
            if agent_id in self._full:  # the store's last word, less this lease
                held, seen = self._full[agent_id]
                self._full[agent_id] = (max(0, held - 1), seen)
        try:
            self._repository().release(claim)
        except StoreError as exc:
            log.warning("could not release lease %s (it expires within %g s): %s",
                        claim, self.settings.lease_ttl_s, exc)

    def held(self, agent_id: str) -> int:
        """Leases of ``agent_id`` held across processes when the store said, in the last
        ``poll_s`` seconds, that it had none free (its limit); 0 otherwise."""
        seen = self._full.get(agent_id)
        if seen is None or time.monotonic() - seen[1] > self.settings.poll_s:
            return 0
        return seen[0]

    def rate_limited(self, agent_id: str) -> bool:
        """True when the store said, in the last ``poll_s`` seconds, that ``agent_id``
        has no call left in the current minute."""
        seen = self._limited.get(agent_id)
        return seen is not None and time.monotonic() - seen <= self.settings.poll_s

    @property
    def degraded(self) -> bool:
        """True while limits are counted per process because the store did not answer."""
        return time.monotonic() < self._degraded_until

    def close(self) -> None:
        """Stop renewing and give back every lease still held (best effort)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=self.settings.renew_every_s + 1)
        with self._lock:
            live, self._live = self._live, {}
            claims = [claim for _, claim in live.values()] + self._unsure
            self._unsure = []
        if claims and self._repo is not None:
            try:
                self._repo.release_all(claims)
            except StoreError as exc:
                log.warning("could not release %d lease(s) at close (they expire within "
                            "%g s): %s", len(live), self.settings.lease_ttl_s, exc)

    # -- inside ----------------------------------------------------------------------
    def _repository(self) -> LeaseRepository:
        if self._repo is None:  # the tables are defined on first use, not at open
            self._repo = self.store.repository(LeaseRepository)
        return self._repo

    def _unreachable(self, exc: StoreUnavailableError | None) -> None:
        """Fail open (return: count in this process) or closed (raise), as configured."""
        if exc is not None:
            self._degraded_until = time.monotonic() + self.settings.renew_every_s
            if self.settings.on_store_error == "open":
                log.warning("shared limits: the store did not answer (%s); counting "
                            "max_concurrent and rpm in this process only for %g s "
                            "(limits.on_store_error=open)", exc, self.settings.renew_every_s)
        if self.settings.on_store_error == "closed":
            raise StoreUnavailableError(
                f"shared limits: the store {self.store.url} cannot be reached and "
                "limits.on_store_error is 'closed', so no call is started") from exc
        with self._lock:
            self.fail_opens += 1

    def _start_renewer(self) -> None:
        with self._lock:
            if self._renewer is None and not self._stop.is_set():
                self._renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                                 name="trustroute-lease-renewer")
                self._renewer.start()

    def _renew_loop(self) -> None:
        """Every ``renew_every_s``: extend the expiry of every live lease and delete the
        claims whose take got no answer, in one request each."""
        while not self._stop.wait(self.settings.renew_every_s):
            with self._lock:
                live, unsure, self._unsure = dict(self._live), self._unsure, []
            try:
                if unsure:
                    self._repository().release_all(unsure)
                kept = self._repository().renew(
                    [claim for _, claim in live.values()], self.settings.lease_ttl_s)
            except StoreError as exc:
                if live:
                    log.warning("could not renew %d lease(s) (they expire %g s after "
                                "their last renewal): %s", len(live),
                                self.settings.lease_ttl_s, exc)
                with self._lock:
                    self._unsure.extend(unsure)  # deleted at the next renewal or close
                continue
            lost = [holder for holder in live if holder not in kept]
            with self._lock:
                lost = [holder for holder in lost if self._live.pop(holder, None)]
                self.lost += len(lost)
            if lost:
                log.warning("%d lease(s) expired before they were renewed (a renewal "
                            "reached the store over %g s after the last one); "
                            "max_concurrent may be exceeded until those calls end",
                            len(lost), self.settings.lease_ttl_s)

"""In-flight tracking for load balancing: leases that cannot leak.

``load = in_flight / max_concurrent``; an agent at capacity (or, with an ``rpm``, at its
rate limit) is skipped by ``select``. A ``Lease`` is a context manager and its
``release`` is idempotent, so an exception, a cancelled stream or a double release never
corrupts the count. A caller waiting for a free slot blocks on a condition that every
release notifies (``wait_for_release``).

Embedded stores serve one process, so counting happens here, in memory. Against a server
store the tracker also takes a lease in the store for each slot (``router.limits``), so
the limits hold across processes; a slot freed in another process notifies nobody here,
so waits are then cut to ``poll_s`` and the caller asks again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING

from trustroute.router.errors import AgentAtCapacity, AgentRateLimited
from trustroute.router.limits import LimitSettings, SharedLimits

if TYPE_CHECKING:
    from trustroute.profiles.store import Store
    from trustroute.router.agents import AgentSpec

#: The window of ``rpm``: calls started in the last 60 seconds.
MINUTE_S = 60.0


class Lease:
    """One in-flight slot of one agent; release it exactly once (extra calls are no-ops)."""

    __slots__ = ("_holder", "_released", "_tracker", "agent_id")

    def __init__(self, tracker: InFlightTracker, agent_id: str,
                 holder: str | None = None) -> None:
        self._tracker = tracker
        self.agent_id = agent_id
        self._holder = holder  # the lease row's holder id in a server store
        self._released = False

    @property
    def shared(self) -> bool:
        """True when the slot is held in the server store (counted by every process)."""
        return self._holder is not None

    @property
    def released(self) -> bool:
        """True once the slot has been given back."""
        return self._released

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        if not self._released:
            self._released = True
            self._tracker._release(self.agent_id, self._holder)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class InFlightTracker:
    """Counts tasks in flight (and calls started per minute) per agent; with ``shared``
    limits, also holds a lease in the server store for each slot."""

    def __init__(self, shared: SharedLimits | None = None, *, poll_s: float = 0.25) -> None:
        self._counts: dict[str, int] = {}
        self._released = threading.Condition()
        self._releases = 0
        self._async_waiters: set[asyncio.Future[None]] = set()  # each wakes on its own loop
        self._starts: dict[str, deque[float]] = {}  # rpm agents: when calls started
        self.shared = shared
        self.poll_s = poll_s
        self._view: Mapping[str, int] = (MappingProxyType(self._counts) if shared is None
                                         else _SharedCounts(self._counts, shared))

    @classmethod
    def for_store(cls, store: Store, limits: LimitSettings) -> InFlightTracker:
        """Limits shared through ``store`` when it is a server (and ``limits.shared``),
        counted in this process otherwise."""
        shared = SharedLimits(store, limits) if (
            limits.shared and store.location.is_remote) else None
        return cls(shared, poll_s=limits.poll_s)

    @property
    def gated(self) -> bool:
        """True when an agent may be blocked by more than its in-flight count here (shared
        limits, or an ``rpm`` in use): ``blocked`` must then be asked."""
        return self.shared is not None or bool(self._starts)

    def blocked(self, spec: AgentSpec, busy: set[str]) -> bool:
        """True when ``spec`` is in ``busy`` or at its rate limit."""
        return spec.id in busy or (spec.rpm is not None and self.rate_limited(
            spec.id, spec.rpm))

    def full(self, spec: AgentSpec) -> bool:
        """True when ``spec`` can take no task now (``max_concurrent`` or ``rpm``)."""
        return self._view.get(spec.id, 0) >= spec.max_concurrent or self.blocked(spec, set())

    @property
    def counts(self) -> Mapping[str, int]:
        """Live read-only view of in-flight counts (cheap to read on the hot path); with
        shared limits, the larger of this process's count and the store's last word."""
        return self._view

    def acquire(self, agent_id: str, limit: int, rpm: int | None = None) -> Lease:
        """Take a slot or raise AgentAtCapacity (AgentRateLimited when ``rpm`` calls
        started in the last minute)."""
        with self._released:
            current = self._counts.get(agent_id, 0)
            if current >= limit:
                raise AgentAtCapacity(agent_id, limit)
            if rpm is not None and self.shared is None:
                self._take_start(agent_id, rpm)
            self._counts[agent_id] = current + 1
        if self.shared is None:
            return Lease(self, agent_id)
        try:  # the store round trip, outside the lock
            holder = self.shared.take(agent_id, limit, rpm)
            if holder is None and rpm is not None:  # the store is down: count here
                with self._released:
                    self._take_start(agent_id, rpm)
        except BaseException:
            with self._released:
                self._counts[agent_id] -= 1
            raise
        return Lease(self, agent_id, holder)

    def rate_limited(self, agent_id: str, rpm: int) -> bool:
        """True when ``agent_id`` may start no more calls now (``rpm`` in the last minute)."""
        if self.shared is not None and self.shared.rate_limited(agent_id):
            return True
        starts = self._starts.get(agent_id)
        if starts is None:
            return False
        with self._released:  # _recent drops old starts: not while a take appends
            return len(_recent(starts)) >= rpm

    def close(self) -> None:
        """Give back the shared leases still held (they would expire anyway)."""
        if self.shared is not None:
            self.shared.close()

    def _take_start(self, agent_id: str, rpm: int) -> None:
        """Count one call started now, or raise AgentRateLimited (the caller holds the lock)."""
        starts = _recent(self._starts.setdefault(agent_id, deque()))
        if len(starts) >= rpm:
            raise AgentRateLimited(agent_id, rpm)
        starts.append(time.monotonic())

    @property
    def releases(self) -> int:
        """How many slots have been given back so far (read before trying to acquire)."""
        return self._releases

    def wait_for_release(self, seen: int, timeout: float | None) -> bool:
        """Block until a slot is released after ``releases`` read ``seen``; False when
        ``timeout`` seconds pass first. With shared or rate limits a slot can come free
        without a release here, so the wait is at most ``poll_s``: ask again after it."""
        timeout = self._bounded(timeout)
        with self._released:
            return self._released.wait_for(lambda: self._releases != seen, timeout)

    async def await_for_release(self, seen: int, timeout: float | None) -> bool:
        """Async ``wait_for_release``: waits on the event loop, holding no thread."""
        timeout = self._bounded(timeout)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._released:
            if self._releases != seen:
                return True
            self._async_waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._released:
                self._async_waiters.discard(waiter)

    def _bounded(self, timeout: float | None) -> float | None:
        """``timeout``, cut to ``poll_s`` when a slot may free without a release here."""
        if self.shared is None and not self._starts:
            return timeout
        return self.poll_s if timeout is None else min(timeout, self.poll_s)

    def _release(self, agent_id: str, holder: str | None) -> None:
        if holder is not None and self.shared is not None:
            self.shared.release(holder)  # free in the store first: waiters elsewhere see it
        with self._released:
            self._counts[agent_id] = max(0, self._counts.get(agent_id, 0) - 1)
            self._releases += 1
            self._released.notify_all()
            waiters, self._async_waiters = self._async_waiters, set()
        for waiter in waiters:
            waiter.get_loop().call_soon_threadsafe(_wake, waiter)


class _SharedCounts(Mapping[str, int]):
    """In-flight counts: this process's, or the store's last word when it is larger."""

    def __init__(self, local: dict[str, int], shared: SharedLimits) -> None:
        self._local = local
        self._shared = shared

    def __getitem__(self, agent_id: str) -> int:
        count = max(self._local.get(agent_id, 0), self._shared.held(agent_id))
        if not count and agent_id not in self._local:
            raise KeyError(agent_id)
        return count

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._local))

    def __len__(self) -> int:
        return len(self._local)


def discounted(score: float, load: float) -> float:
    """A score discounted by the agent's load (``in_flight / max_concurrent``): halved at
    full load for a positive score, doubled in magnitude for a negative one."""
    return score / (1.0 + load) if score >= 0 else score * (1.0 + load)


def _recent(starts: deque[float]) -> deque[float]:
    """``starts`` without the calls that started more than a minute ago."""
    cutoff = time.monotonic() - MINUTE_S
    while starts and starts[0] <= cutoff:
        starts.popleft()
    return starts


def _wake(waiter: asyncio.Future[None]) -> None:
    """Resolve an async waiter (on its own loop) unless it already timed out."""
    if not waiter.done():
        waiter.set_result(None)

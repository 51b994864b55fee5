"""In-flight tracking for load balancing: leases that cannot leak.

``load = in_flight / max_concurrent``; an agent at capacity is skipped by ``select``.
A ``Lease`` is a context manager and its ``release`` is idempotent, so an exception,
a cancelled stream or a double release never corrupts the count. A caller waiting for a
free slot blocks on a condition that every release notifies (``wait_for_release``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from types import MappingProxyType, TracebackType

from trustroute.router.errors import AgentAtCapacity


class Lease:
    """One in-flight slot of one agent; release it exactly once (extra calls are no-ops)."""

    __slots__ = ("_released", "_tracker", "agent_id")

    def __init__(self, tracker: InFlightTracker, agent_id: str) -> None:
        self._tracker = tracker
        self.agent_id = agent_id
        self._released = False

    @property
    def released(self) -> bool:
        """True once the slot has been given back."""
        return self._released

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        if not self._released:
            self._released = True
            self._tracker._release(self.agent_id)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class InFlightTracker:
    """Counts tasks in flight per agent."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._released = threading.Condition()
        self._releases = 0
        self._async_waiters: set[asyncio.Future[None]] = set()  # each wakes on its own loop
        self._view = MappingProxyType(self._counts)

    @property
    def counts(self) -> Mapping[str, int]:
        """Live read-only view of in-flight counts (cheap to read on the hot path)."""
        return self._view

    def acquire(self, agent_id: str, limit: int) -> Lease:
        """Take a slot or raise AgentAtCapacity."""
        with self._released:
            current = self._counts.get(agent_id, 0)
            if current >= limit:
                raise AgentAtCapacity(agent_id, limit)
            self._counts[agent_id] = current + 1
        return Lease(self, agent_id)

    @property
    def releases(self) -> int:
        """How many slots have been given back so far (read before trying to acquire)."""
        return self._releases

    def wait_for_release(self, seen: int, timeout: float | None) -> bool:
        """Block until a slot is released after ``releases`` read ``seen``; False when
        ``timeout`` seconds pass first."""
        with self._released:
            return self._released.wait_for(lambda: self._releases != seen, timeout)

    async def await_for_release(self, seen: int, timeout: float | None) -> bool:
        """Async ``wait_for_release``: waits on the event loop, holding no thread."""
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

    def _release(self, agent_id: str) -> None:
        with self._released:
            self._counts[agent_id] = max(0, self._counts.get(agent_id, 0) - 1)
            self._releases += 1
            self._released.notify_all()
            waiters, self._async_waiters = self._async_waiters, set()
        for waiter in waiters:
            waiter.get_loop().call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    """Resolve an async waiter (on its own loop) unless it already timed out."""
    if not waiter.done():
        waiter.set_result(None)

"""In-flight tracking for load balancing: leases that cannot leak.

``load = in_flight / max_concurrent``; an agent at capacity is skipped by ``select``.
A ``Lease`` is a context manager and its ``release`` is idempotent, so an exception,
a cancelled stream or a double release never corrupts the count.
"""

from __future__ import annotations

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
        self._lock = threading.Lock()
        self._view = MappingProxyType(self._counts)

    @property
    def counts(self) -> Mapping[str, int]:
        """Live read-only view of in-flight counts (cheap to read on the hot path)."""
        return self._view

    def in_flight(self, agent_id: str) -> int:
        """Tasks currently running on ``agent_id``."""
        return self._counts.get(agent_id, 0)

    def acquire(self, agent_id: str, limit: int) -> Lease:
        """Take a slot or raise AgentAtCapacity."""
        with self._lock:
            current = self._counts.get(agent_id, 0)
            if current >= limit:
                raise AgentAtCapacity(agent_id, limit)
            self._counts[agent_id] = current + 1
        return Lease(self, agent_id)

    def _release(self, agent_id: str) -> None:
        with self._lock:
            self._counts[agent_id] = max(0, self._counts.get(agent_id, 0) - 1)

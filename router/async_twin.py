"""Async twins of blocking methods: the same work in a worker thread, so an event loop
is never blocked (``arecord``, ``aflush``, ... of ``AgentRouter``).

Cancelling the caller (a client that went away, ``asyncio.wait_for``) does not cancel
the work: a thread cannot be stopped part-way, and a call cancelled while still queued
for a thread would otherwise never run, so a ``record`` would neither be written nor
release its decision's slot. The work is carried out as if awaited; what it took that
the cancelled caller can no longer give back (a decision's slot) is given back by
``undo``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


async def carried_out(func: Callable[..., R], *args: Any,
                      undo: Callable[[R], object] | None = None, **kwargs: Any) -> R:
    """``func(*args, **kwargs)`` in a worker thread, finished even if the caller is
    cancelled; then ``undo`` is called (in a thread) with what it returned."""
    work = asyncio.ensure_future(asyncio.to_thread(func, *args, **kwargs))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        if undo is not None:
            work.add_done_callback(functools.partial(_undo, undo))
        raise


def _undo(undo: Callable[[Any], object], work: asyncio.Future[Any]) -> None:
    if not work.cancelled() and work.exception() is None:
        asyncio.get_running_loop().run_in_executor(None, undo, work.result())


def in_thread(method: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The async twin of a method that may block (the store, or the router's lock): it
    runs in a worker thread, so an event loop is never blocked, and is carried out even
    if the caller is cancelled."""
    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        return await carried_out(functools.partial(method, *args, **kwargs))

    functools.update_wrapper(twin, method)  # help() and inspect show method's signature
    twin.__name__ = twin.__qualname__ = f"a{method.__name__}"
    twin.__doc__ = f"Async ``{method.__name__}`` (runs in a worker thread; carried out " \
        "even if the caller is cancelled)."
    return twin

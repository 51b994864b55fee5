"""The TransferHook protocol and how a hook is called, sync or async.

A hook is any callable taking a ``TransferRequest``; it may be a plain function, a
coroutine function, or an object with ``__call__`` (and optionally ``acall`` for a native
async path). What it returns is kept as the hook's response (the LangGraph adapter returns
the person's answer). Optional attributes tune how the dispatcher treats it:

- ``name``: shown in logs and stored with pending requests (default: the callable's name);
- ``dispatch_attempts``: how often the dispatcher tries it (hooks that retry internally,
  like the webhook, set 1 so attempts do not multiply);
- ``passthrough``: exception types that are control flow, not failure (LangGraph's
  ``GraphInterrupt``): re-raised at once, never retried or stored as pending;
- ``runs_last``: run after the other hooks (a hook that pauses the caller);
- ``returns_human_response`` / ``inline``: run on the caller's thread even when the
  dispatcher delivers in the background (the caller waits for its answer), as hooks
  with a ``passthrough`` do;
- ``prepare_request(request)``: called before any hook delivers; returns the request all
  hooks receive. The LangGraph hook sets a ``request_id`` derived from the graph's
  checkpoint and task, so hooks that fire again when a paused node re-runs send the same
  id; a hook that prepares must keep a ``request_id`` the caller set.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

from trustroute.router.handoff.transfer.request import TransferRequest


class HookRejected(RuntimeError):
    """A hook's receiver answered and refused this request: it is up, so other requests
    may still pass (a retry sweep goes on to them instead of waiting for this one)."""


@runtime_checkable
class TransferHook(Protocol):
    """Receives a request to hand a task to a person; may be sync or async."""

    def __call__(self, request: TransferRequest) -> Any | Awaitable[Any]:
        """Deliver ``request`` (raise to signal failure; the dispatcher retries)."""


def hook_name(hook: Any) -> str:
    """A short, stable name for logs and stored pending rows."""
    name = getattr(hook, "name", None)
    if isinstance(name, str) and name:
        return name
    func_name = getattr(hook, "__name__", None)
    if isinstance(func_name, str) and func_name != "<lambda>":
        return func_name
    return type(hook).__name__


def passthrough_of(hook: Any) -> tuple[type[BaseException], ...]:
    """Exception types the hook raises as control flow (re-raised, never retried)."""
    value = getattr(hook, "passthrough", ())
    return tuple(value) if isinstance(value, tuple | list) else ()


def inline_hook(hook: Any) -> bool:
    """Whether the hook must run on the caller's thread even with background delivery:
    its answer is what the caller waits for (``returns_human_response``), it raises
    control flow the caller must see (``passthrough``), or it says so (``inline``)."""
    return bool(
        getattr(hook, "inline", False)
        or getattr(hook, "returns_human_response", False)
        or passthrough_of(hook)
    )


def call_hook(hook: Any, request: TransferRequest) -> Any:
    """Call a hook synchronously (awaiting it when it is async, even inside a running loop)."""
    result = hook(request)
    if not inspect.isawaitable(result):
        return result

    async def wrap() -> Any:
        return await result

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrap())
    # a sync dispatch from inside an event loop: run the coroutine on a private loop in a
    # helper thread (with this context's variables) rather than deadlocking the caller's
    with ThreadPoolExecutor(1, thread_name_prefix="trustroute-hook") as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, wrap()).result()


async def acall_hook(hook: Any, request: TransferRequest) -> Any:
    """Call a hook from async code: its ``acall`` when it has one, a coroutine function
    directly, and a plain sync callable in a worker thread so the loop never blocks."""
    acall = getattr(hook, "acall", None)
    if callable(acall):
        return await acall(request)
    if inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(type(hook).__call__):
        return await hook(request)
    result = await asyncio.to_thread(hook, request)
    if inspect.isawaitable(result):
        return await result
    return result

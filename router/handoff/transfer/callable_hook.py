"""A Python callable as a transfer hook, given directly or by import path in a config file."""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from typing import Any

from trustroute.router.handoff.transfer.hook import acall_hook, call_hook
from trustroute.router.handoff.transfer.request import TransferRequest


def import_target(target: str) -> Callable[..., Any]:
    """Resolve ``package.module:attribute`` (or ``package.module.attribute``) to a callable."""
    try:
        obj = pkgutil.resolve_name(target)
    except AttributeError as exc:
        owner = getattr(getattr(exc, "obj", None), "__name__", "its module")
        raise ValueError(f"hook target {target!r}: {owner!r} has no {exc.name!r}") from None
    except (ImportError, ValueError) as exc:  # ValueError: not a dotted name at all
        raise ValueError(
            f"hook target {target!r}: cannot import it ({exc}); write 'package.module:function'"
        ) from None
    if not callable(obj):
        raise ValueError(f"hook target {target!r} is not callable")
    return obj


class CallableHook:
    """Calls ``func(request)``; ``func`` may be sync or async."""

    def __init__(
        self, func: Callable[[TransferRequest], Any] | str, *, name: str | None = None
    ) -> None:
        self.func = import_target(func) if isinstance(func, str) else func
        if not callable(self.func):
            raise TypeError(f"CallableHook needs a callable, got {type(self.func).__name__}")
        self.name = name or getattr(self.func, "__name__", None) or "callable"

    def __repr__(self) -> str:
        return f"CallableHook({self.name!r})"

    def __call__(self, request: TransferRequest) -> Any:
        """Call the function (an async one is driven to completion)."""
        return call_hook(self.func, request)

    async def acall(self, request: TransferRequest) -> Any:
        """Await an async function; run a sync one in a worker thread."""
        return await acall_hook(self.func, request)

"""A Python callable as a transfer hook, given directly or by import path in a config file.

A hook given by import path (``target: helpdesk_app.hooks:open_ticket``) is imported when
it is first used, not when the config is loaded: commands and routers that never hand
anything over never import the application's code. When ``sys.path`` cannot import it,
the folders of ``search_path`` (the config file's folder, for a config entry) are appended
to ``sys.path`` and the import is tried once more, so an application whose package sits
next to its ``router.yaml`` needs no ``PYTHONPATH``.
"""

from __future__ import annotations

import functools
import os
import pkgutil
import re
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from trustroute.router.handoff.transfer.hook import acall_hook, call_hook
from trustroute.router.handoff.transfer.request import TransferRequest

_DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
TARGET_PATTERN = re.compile(rf"{_DOTTED}(?::{_DOTTED})?")
_IMPORT_LOCK = threading.Lock()  # sys.path is extended once, by one thread


def check_target(target: str) -> str:
    """``target`` if it is written as ``package.module:attribute`` (or all dotted)."""
    if not TARGET_PATTERN.fullmatch(target):
        raise ValueError(f"hook target {target!r}: write 'package.module:function'")
    return target


def _top_package(target: str) -> str:
    return target.partition(":")[0].partition(".")[0]


def _resolve(target: str) -> Any:
    try:
        return pkgutil.resolve_name(target)
    except AttributeError as exc:
        owner = getattr(getattr(exc, "obj", None), "__name__", "its module")
        raise ValueError(f"hook target {target!r}: {owner!r} has no {exc.name!r}") from None


def import_target(
    target: str, search_path: Iterable[str | os.PathLike[str]] = ()
) -> Callable[..., Any]:
    """Resolve ``package.module:attribute`` (or ``package.module.attribute``) to a callable.

    When its top-level package is not on ``sys.path``, the folders of ``search_path`` are
    appended to ``sys.path`` (they stay: the module may import its neighbours later) and
    the import is tried again.
    """
    check_target(target)
    folders = [str(Path(p).resolve()) for p in search_path]
    try:
        try:
            obj = _resolve(target)
        except ModuleNotFoundError as exc:
            if exc.name != _top_package(target) or not folders:
                raise
            with _IMPORT_LOCK:
                sys.path.extend(f for f in folders if f not in sys.path)
            obj = _resolve(target)
    except ImportError as exc:
        where = "sys.path" + "".join(f" and in {f}" for f in folders)
        missing = exc.name or _top_package(target)
        raise ValueError(
            f"hook target {target!r}: cannot import it ({exc}); looked on {where}. Install the "
            f"package that provides {missing!r}, or set PYTHONPATH to the folder that holds it "
            f"(PYTHONPATH=. when it is in the folder you run from)"
        ) from None
    if not callable(obj):
        raise ValueError(f"hook target {target!r} is not callable")
    return obj


class CallableHook:
    """Calls ``func(request)``; ``func`` may be sync or async.

    ``func`` may be an import path (``"package.module:function"``), imported on first use
    (see ``import_target``; ``search_path`` are the folders tried when ``sys.path`` cannot
    import it). Its default name is then the path's last part (``function``), so pending
    rows keep one name whether or not the import worked.
    """

    def __init__(
        self,
        func: Callable[[TransferRequest], Any] | str,
        *,
        name: str | None = None,
        search_path: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        self.target: str | None = None
        self.search_path = [Path(p) for p in search_path]
        if isinstance(func, str):
            self.target = check_target(func)
            default = re.split(r"[:.]", func)[-1]
        elif callable(func):
            self.func = func
            default = getattr(func, "__name__", None) or "callable"
        else:
            raise TypeError(f"CallableHook needs a callable, got {type(func).__name__}")
        self.name = name or default

    def __repr__(self) -> str:
        return f"CallableHook({self.name!r})"

    @functools.cached_property
    def func(self) -> Callable[..., Any]:
        """The function, imported on first use when it was given by path."""
        assert self.target is not None  # else __init__ set it
        return import_target(self.target, self.search_path)

    def __call__(self, request: TransferRequest) -> Any:
        """Call the function (an async one is driven to completion)."""
        return call_hook(self.func, request)

    async def acall(self, request: TransferRequest) -> Any:
        """Await an async function; run a sync one in a worker thread."""
        return await acall_hook(self.func, request)

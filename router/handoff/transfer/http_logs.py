"""httpx and httpcore log records of webhook deliveries, with URLs and header values masked.

httpx logs every request's full URL at INFO (``HTTP Request: POST https://host/hook?token=…``)
and httpcore logs response headers at DEBUG (a redirect's ``Location``, with its query).
While a webhook delivery runs (and only then: other users of httpx in the process are left
alone), a filter on those loggers masks user:password and query strings in URLs, and every
header value, before any handler sees the record.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

HTTP_LOGGERS = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
_URL = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?:[^/\s'\"@]*@)?"  # user:password@ dropped
    r"(?P<rest>[^\s'\"?#]*)(?:\?[^\s'\"#]*)?(?:#[^\s'\"]*)?"  # query and fragment dropped
)
_BYTES = r"""b(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
_HEADER = re.compile(rf"\(({_BYTES}), {_BYTES}\)")  # a (name, value) pair as httpcore logs it
_delivering: ContextVar[bool] = ContextVar("trustroute_webhook_delivering", default=False)


def mask(text: str) -> str:
    """``text`` with URLs' credentials and queries and all logged header values removed."""
    return _HEADER.sub(r"(\1, b'***')", _URL.sub(r"\g<scheme>\g<rest>", text))


def _mask_during_delivery(record: logging.LogRecord) -> bool:
    if _delivering.get():
        record.msg, record.args = mask(record.getMessage()), ()
    return True


@functools.cache
def _install() -> None:
    for name in HTTP_LOGGERS:
        logging.getLogger(name).addFilter(_mask_during_delivery)


@contextmanager
def masked_http_logs() -> Iterator[None]:
    """Mask what httpx and httpcore log in this thread or task until the block ends."""
    _install()
    token = _delivering.set(True)
    try:
        yield
    finally:
        _delivering.reset(token)

"""What a receiver's ``Retry-After`` asks (RFC 9110, section 10.2.3), as tenacity strategies.

A receiver answering 429 (too many requests) or 503 (unavailable) may say how long to
wait. The Standard Webhooks spec asks senders to take it into account: a retry sooner
than that is wasted and adds to the load that made the receiver say it. So the webhook
waits at least that long between its attempts, and when the receiver asks for longer
than its longest backoff (``max_backoff_s``), it stops trying now: the request stays
pending and the background sweep (``dispatch_retry_interval_s``) tries it again later,
rather than holding the delivery thread for as long as the receiver asked.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable

from tenacity import RetryCallState
from tenacity.stop import stop_base
from tenacity.wait import wait_base


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """The seconds a ``Retry-After`` value asks to wait: delay-seconds or an HTTP date;
    None when there is none or it cannot be read."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def asked_wait(state: RetryCallState) -> float | None:
    """What the last failure's receiver asked to wait (its ``retry_after``), if anything."""
    exc = state.outcome.exception() if state.outcome is not None else None
    return getattr(exc, "retry_after", None)


class WaitRetryAfter(wait_base):
    """Wait as ``base`` says, or as long as the receiver asked when that is longer."""

    def __init__(self, base: Callable[[RetryCallState], float]) -> None:
        self.base = base

    def __call__(self, state: RetryCallState) -> float:
        return max(self.base(state), asked_wait(state) or 0.0)


class StopWhenAskedToWait(stop_base):
    """Stop when the receiver asked to wait longer than ``limit_s`` seconds."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s

    def __call__(self, state: RetryCallState) -> bool:
        asked = asked_wait(state)
        return asked is not None and asked > self.limit_s

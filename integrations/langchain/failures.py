"""Agent failures made visible: ``RoutedRunnable`` logs each one on the logger
``trustroute.integrations.langchain.failures``.

A failure that is recorded (the task falls back, or a stream already under way raises
it) is a WARNING naming the agent, the task type and the exception's type and message,
at most once per ``interval_s`` for the same (agent, task type, exception type); the
next one says how many were held back. Every failure, recorded or not, is also logged at
DEBUG with its traceback. A broken prompt fails every call: at 100 calls a second,
unthrottled warnings would be 6,000 identical lines a minute, and one a minute per kind
keeps it as visible without drowning the other kinds.
"""

from __future__ import annotations

import logging
import math
import threading
import time

log = logging.getLogger(__name__)

#: Most (agent, task type, exception type) kinds remembered; the oldest is forgotten
#: first (it may then warn again early, which is harmless).
MAX_KINDS = 1024
MAX_MESSAGE_CHARS = 500


def describe(error: BaseException) -> str:
    """``Type: message`` on one line: non-printable characters (newlines, ESC) escaped,
    the message cut at ``MAX_MESSAGE_CHARS``."""
    text = str(error)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                       for c in text)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class RateLimit:
    """At most one message per ``interval_s`` for each kind, counting those held back."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, ...], tuple[float, int]] = {}  # last let through, held

    def held_back(self, kind: tuple[str, ...]) -> int | None:
        """None while ``kind`` was let through within ``interval_s`` (counted as held
        back); otherwise how many were held back since it last was."""
        now = time.monotonic()
        with self._lock:
            last, held = self._kinds.pop(kind, (-math.inf, 0))
            if now - last < self.interval_s:
                self._kinds[kind] = (last, held + 1)
                return None
            if len(self._kinds) >= MAX_KINDS:
                del self._kinds[next(iter(self._kinds))]
            self._kinds[kind] = (now, 0)
            return held


class FailureLog:
    """Logs agent failures: a rate-limited WARNING per kind, every traceback at DEBUG."""

    def __init__(self, interval_s: float) -> None:
        self.limit = RateLimit(interval_s)

    def failed(self, agent_id: str, task_type: str, error: BaseException, *,
               recorded: bool, then: str, warn: bool | None = None) -> None:
        """Log that ``agent_id`` raised ``error`` on ``task_type``; ``then`` says what
        happens next. Only ``recorded`` failures are warned about (unless ``warn`` says
        otherwise: an error the caller does not get, such as an agent that cannot run
        on a sync call, falling back): the others reach the caller unchanged, which
        reports them already."""
        summary = f"agent {agent_id!r} failed on task type {task_type!r}: {describe(error)}"
        extra = {"agent_id": agent_id, "task_type": task_type,
                 "error_type": type(error).__name__}
        log.debug("%s (%s)", summary, then, exc_info=error, extra=extra)
        if not (recorded if warn is None else warn):
            return
        held = self.limit.held_back((agent_id, task_type, type(error).__qualname__))
        if held is None:
            return
        more = f"; {held} more like it since the last warning" if held else ""
        log.warning("%s (%s%s)", summary, then, more, extra=extra)

"""A transfer hook that POSTs each request as JSON to an HTTP endpoint (a helpdesk, a queue).

HTTP is httpx: ``httpx.Client`` for a call, ``httpx.AsyncClient`` for ``acall``, one client
per delivery and no connection kept between attempts. Retries are tenacity's (exponential
backoff, bounded) on what may pass: timeouts, connection errors, 5xx, 408, 425, 429 and
3xx. A 409 is the receiver saying it already has this ``webhook-id``: delivered.
Redirects are never followed (the signed body would go to a host nobody
configured), so a 3xx is a failed attempt whose error names the status; after the last
attempt the dispatcher keeps the request pending. Any other 4xx means the receiver
rejected the request and retrying will not help, so it fails at once.

``timeout_s`` is a deadline for a whole attempt (connect, send, response headers), not a
limit per socket read, so a receiver that trickles its answer cannot hold a delivery
longer. httpx itself only limits each operation, so the async path runs the attempt under
``asyncio.timeout`` and the sync path arms a timer that shuts the attempt's socket down
when time is up (the socket is learnt from httpcore's ``trace`` extension). The response
body is never read.

Every request carries the Standard Webhooks headers (https://www.standardwebhooks.com/):
``webhook-id`` (the request id, the same on every attempt and retry, for de-duplication)
and ``webhook-timestamp`` (Unix seconds of this attempt). With ``secret_env`` each attempt
is signed: ``webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``,
keyed with the secret in that environment variable, written ``whsec_<base64 key>`` and
read at send time (rotation needs no restart). The timestamp is signed, so a receiver that
refuses stale timestamps cannot be replayed a captured request. The secret, headers and
URL query strings never appear in logs or error messages; while a delivery runs, what
httpx and httpcore log has URL credentials and queries and header values masked
(``http_logs.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import threading
import time
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from trustroute.profiles.records import check_identifier
from trustroute.profiles.validation import NOT_A_BOOL, validated
from trustroute.router.handoff.settings import Backoff
from trustroute.router.handoff.transfer.hook import HookRejected
from trustroute.router.handoff.transfer.http_logs import masked_http_logs
from trustroute.router.handoff.transfer.request import TransferRequest
from trustroute.router.handoff.transfer.retry_after import (
    StopWhenAskedToWait,
    WaitRetryAfter,
    retry_after_s,
)
from trustroute.router.handoff.transfer.signing import secret_key, sign

log = logging.getLogger(__name__)

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
_RETRY_STATUSES = frozenset({408, 425, 429})
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)
# 409 Conflict: the receiver already has this webhook-id (a retry that raced a delivery),
# so the request has reached it: delivered, not rejected
DUPLICATE = 409
# 410 Gone: the endpoint is gone for good (Standard Webhooks: disable it); this hook sends
# nothing more from this process, and what it could not deliver stays pending
GONE = 410
_SOCKET_EVENTS = frozenset({"connection.connect_tcp.complete", "connection.start_tls.complete"})


class WebhookError(RuntimeError):
    """A webhook delivery failed for good (after retries, or rejected by the receiver).
    ``retry_after``: the seconds the receiver last asked to wait (the sweep honours it)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WebhookRejected(WebhookError, HookRejected):
    """The receiver answered with a status that refuses this request (a 4xx not retried)."""


class _Transient(Exception):
    """A failure worth another attempt (``retry_after``: seconds the receiver asked for)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Message:
    """One delivery's body and headers; ``stamped()`` adds this attempt's timestamp and
    signature (a retry minutes later is signed with its own time)."""

    def __init__(self, msg_id: str, body: bytes, headers: dict[str, str], key: bytes | None):
        self.msg_id, self.body, self.headers, self._key = msg_id, body, headers, key

    def stamped(self) -> dict[str, str]:
        """The headers for an attempt starting now."""
        now = int(time.time())
        headers = {**self.headers, TIMESTAMP_HEADER: str(now)}
        if self._key is not None:
            headers[SIGNATURE_HEADER] = sign(self.msg_id, now, self.body, self._key)
        return headers


def redact_url(url: str) -> str:
    """The URL without user:password and without the query string (tokens often live there)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


class WebhookSettings(BaseModel):
    """A webhook hook's settings: ``WebhookHook``'s keywords and a ``type: webhook`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    url: str
    # a member of the hooks' discriminated union: true/false refused field by field
    timeout_s: Annotated[float, NOT_A_BOOL, Field(gt=0, allow_inf_nan=False)] = 5.0
    attempts: Annotated[int, NOT_A_BOOL, Field(ge=1)] = 3
    backoff_s: Annotated[Backoff, NOT_A_BOOL] = 0.5
    max_backoff_s: Annotated[Backoff, NOT_A_BOOL] = 5.0
    secret_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    headers: dict[str, str] = Field(default_factory=dict)
    name: str = "webhook"

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https"):
            raise ValueError("must start with http:// or https://")
        try:
            port_ok = parts.port is None or parts.port > 0
        except ValueError:  # a port that is not a number within 0-65535
            port_ok = False
        if not parts.hostname or not port_ok or any(c.isspace() for c in value):
            raise ValueError("must name a host (and a port within 1-65535), without spaces")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        # a value is never echoed: it may be a token (a trailing newline from a mounted
        # secret or an environment variable would otherwise leak in every error)
        for name, text in value.items():
            if not HEADER_NAME.fullmatch(name):
                raise ValueError(f"header name {name!r} is not an HTTP header name")
            if text != text.strip() or any((ord(c) < 32 and c != "\t") or ord(c) == 127
                                            for c in text):
                raise ValueError(f"the value of header {name!r} holds a line break, a control "
                                 "character or spaces at an end (a trailing newline?)")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_identifier(value, "name")  # stored with each pending row


class _SocketDeadline:
    """Sync path: shut the attempt's sockets down once ``seconds`` have passed.

    Shutting a socket down wakes a thread blocked reading or writing it, which then fails;
    ``expired`` tells the caller that failure was the deadline. No lock: the timer sets
    ``expired`` before reading ``sockets`` and ``trace`` appends before reading
    ``expired``, so a socket connected as time runs out is shut down by one or the other.
    """

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self.sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _SocketDeadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()
        self.sockets.clear()  # the attempt is over: its sockets are no longer ours

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: note each socket the attempt opens."""
        if event in _SOCKET_EVENTS:
            self.sockets.append(info["return_value"].get_extra_info("socket"))
            if self.expired:
                self._expire()

    def _expire(self) -> None:
        self.expired = True
        for sock in list(self.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class WebhookHook:
    """POST the request's JSON payload to ``url``; keywords as in ``WebhookSettings``."""

    dispatch_attempts = 1  # retries itself; the dispatcher must not multiply attempts

    def __init__(self, url: str, **options: Any) -> None:
        """Bad settings raise ValueError on one line naming each (never a header value)."""
        self.settings = validated(WebhookSettings, {**options, "url": url})
        self.name = self.settings.name  # in logs and pending rows
        self.gone = False  # the endpoint answered 410 Gone: nothing more is sent to it

    def __repr__(self) -> str:
        signed = f", secret_env={self.settings.secret_env!r}" if self.settings.secret_env else ""
        return f"WebhookHook({redact_url(self.settings.url)!r}{signed})"

    def body(self, request: TransferRequest) -> bytes:
        """The exact bytes sent (and signed): compact JSON with sorted keys, UTF-8."""
        return json.dumps(
            request.payload(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")

    def _key(self) -> bytes | None:
        """The signing key from ``secret_env`` (None: unsigned); read at send time."""
        env = self.settings.secret_env
        if not env:
            return None
        secret = os.environ.get(env)
        if not secret:
            raise WebhookError(
                f"webhook {self.name!r}: environment variable {env} (secret_env) is not set "
                "or empty"
            )
        try:
            return secret_key(secret)
        except ValueError as exc:
            raise WebhookError(
                f"webhook {self.name!r}: environment variable {env} (secret_env) is not a "
                f"Standard Webhooks secret: {exc}; nothing was sent"
            ) from None

    def _message(self, request: TransferRequest) -> _Message:
        """What every attempt of this delivery sends; each attempt stamps and signs it."""
        if self.gone:
            raise WebhookRejected(f"POST {redact_url(self.settings.url)} answered 410 Gone "
                                  "before; not sent (kept pending)")
        headers = {
            "User-Agent": "trustroute-webhook",
            **self.settings.headers,
            "Content-Type": "application/json; charset=utf-8",
            "X-Trustroute-Request-Id": request.request_id,
            ID_HEADER: request.request_id,
        }
        return _Message(request.request_id, self.body(request), headers, self._key())

    # -- one attempt -----------------------------------------------------------------------
    def _client_options(self) -> dict[str, Any]:
        return {
            "timeout": httpx.Timeout(self.settings.timeout_s),
            "follow_redirects": False,
            "limits": httpx.Limits(max_keepalive_connections=0),
        }

    def _post(self, client: httpx.Client, message: _Message) -> int:
        with masked_http_logs(), _SocketDeadline(self.settings.timeout_s) as deadline:
            try:
                with client.stream(
                    "POST",
                    self.settings.url,
                    content=message.body,
                    headers=message.stamped(),
                    extensions={"trace": deadline.trace},
                ) as response:
                    return self._status(response)
            except httpx.HTTPError as exc:
                raise self._transient(exc, deadline.expired) from None

    async def _apost(self, client: httpx.AsyncClient, message: _Message) -> int:
        try:
            with masked_http_logs():
                async with (
                    asyncio.timeout(self.settings.timeout_s),
                    client.stream(
                        "POST", self.settings.url, content=message.body, headers=message.stamped()
                    ) as response,
                ):
                    return self._status(response)
        except (TimeoutError, httpx.HTTPError) as exc:  # TimeoutError: asyncio.timeout's
            raise self._transient(exc) from None

    def _status(self, response: httpx.Response) -> int:
        """The status of a delivered request; raises for any other answer."""
        status = response.status_code
        if 200 <= status < 300 or status == DUPLICATE:
            return status
        if 300 <= status < 400:
            location = response.headers.get("location")
            to = f" to {redact_url(location)}" if location else ""
            raise _Transient(f"HTTP {status}: redirect{to} not followed")
        if status >= 500 or status in _RETRY_STATUSES:
            asked = retry_after_s(response.headers.get("retry-after"))
            raise _Transient(f"HTTP {status}" if asked is None else
                             f"HTTP {status} (retry after {asked:.0f} s)", asked)
        if status == GONE and not self.gone:
            self.gone = True
            log.warning("webhook %s: %s answered 410 Gone; nothing more is sent to it until "
                        "the process restarts, and hand-offs stay pending",
                        self.name, redact_url(self.settings.url))
        raise WebhookRejected(
            f"POST {redact_url(self.settings.url)} was rejected with HTTP {status}; not retried"
        )

    def _transient(self, exc: Exception, deadline_expired: bool = False) -> _Transient:
        if deadline_expired or isinstance(exc, TimeoutError | httpx.TimeoutException):
            return _Transient(f"timed out after {self.settings.timeout_s:g} s")
        return _Transient(f"connection failed: {type(exc).__name__}: {exc}")

    # -- delivery --------------------------------------------------------------------------
    def _retry_options(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.settings.attempts)
            | StopWhenAskedToWait(self.settings.max_backoff_s),
            "wait": WaitRetryAfter(wait_exponential(multiplier=self.settings.backoff_s,
                                                    max=self.settings.max_backoff_s)),
            "retry": retry_if_exception_type(_Transient),
            "before_sleep": self._log_retry,
            "retry_error_callback": self._give_up,
        }

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.info(
            "webhook %s: attempt %d to %s failed (%s); retrying",
            self.name,
            state.attempt_number,
            redact_url(self.settings.url),
            exc,
        )

    def _give_up(self, state: RetryCallState) -> NoReturn:
        exc = state.outcome.exception() if state.outcome else None
        raise WebhookError(
            f"POST {redact_url(self.settings.url)} failed after "
            f"{state.attempt_number} attempt(s): {exc}",
            retry_after=getattr(exc, "retry_after", None),
        )

    def _delivered(self, request: TransferRequest, status: int) -> int:
        log.debug(
            "webhook %s: delivered %s to %s (HTTP %d)",
            self.name,
            request.request_id,
            redact_url(self.settings.url),
            status,
        )
        return status

    def __call__(self, request: TransferRequest) -> int:
        """Deliver ``request``; returns the HTTP status, raises WebhookError on failure."""
        message = self._message(request)
        with httpx.Client(**self._client_options()) as client:
            status: int = Retrying(**self._retry_options())(self._post, client, message)
        return self._delivered(request, status)

    async def acall(self, request: TransferRequest) -> int:
        """Deliver from async code without blocking the event loop (same rules)."""
        message = self._message(request)
        async with httpx.AsyncClient(**self._client_options()) as client:
            retrying = AsyncRetrying(**self._retry_options())
            status: int = await retrying(self._apost, client, message)
        return self._delivered(request, status)

    def describe(self) -> dict[str, Any]:
        """Safe-to-print settings (no secret, no query string)."""
        return {
            "name": self.name,
            "url": redact_url(self.settings.url),
            "timeout_s": self.settings.timeout_s,
            "attempts": self.settings.attempts,
            "signed": bool(self.settings.secret_env),
        }

"""A transfer hook that POSTs each request as JSON to an HTTP endpoint (a helpdesk, a queue).

Delivery is retried with tenacity (exponential backoff, bounded) on what may pass: timeouts,
refused connections, 5xx, 408 and 429. Any other 4xx means the receiver rejected the
request and retrying will not help, so it fails at once. With ``secret_env`` the body is
signed: ``X-Trustroute-Signature: sha256=<hex HMAC-SHA256 of the raw body>`` using the
secret in that environment variable, read at send time (rotation needs no restart). The
secret, headers and URL query strings never appear in logs or error messages.

Only the standard library is used for HTTP, so the hook adds no dependency.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)
from trustroute.router.handoff.transfer.request import TransferRequest

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Trustroute-Signature"
_RETRY_STATUSES = frozenset({408, 425, 429})


class WebhookError(RuntimeError):
    """A webhook delivery failed for good (after retries, or rejected by the receiver)."""


class _Transient(Exception):
    """A failure worth another attempt."""


def redact_url(url: str) -> str:
    """The URL without user:password and without the query string (tokens often live there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def sign(body: bytes, secret: str) -> str:
    """The signature header value for ``body``: ``sha256=<hex digest>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class WebhookHook:
    """POST the request's JSON payload to ``url``."""

    dispatch_attempts = 1  # retries itself; the dispatcher must not multiply attempts

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        attempts: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 5.0,
        secret_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        name: str = "webhook",
    ) -> None:
        scheme = urlsplit(url).scheme if isinstance(url, str) else ""
        if scheme not in ("http", "https"):
            raise ValueError(
                f"webhook url must start with http:// or https://, got "
                f"{redact_url(url) if isinstance(url, str) else url!r}"
            )
        if timeout_s <= 0:
            raise ValueError(f"webhook timeout_s must be > 0, got {timeout_s}")
        if attempts < 1:
            raise ValueError(f"webhook attempts must be >= 1, got {attempts}")
        if backoff_s < 0 or max_backoff_s < 0:
            raise ValueError("webhook backoff_s and max_backoff_s must be >= 0")
        self.url = url
        self.timeout_s = float(timeout_s)
        self.attempts = int(attempts)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.secret_env = secret_env
        self.headers = dict(headers or {})
        self.name = name

    def __repr__(self) -> str:
        signed = f", secret_env={self.secret_env!r}" if self.secret_env else ""
        return f"WebhookHook({redact_url(self.url)!r}{signed})"

    def body(self, request: TransferRequest) -> bytes:
        """The exact bytes sent (and signed): compact JSON with sorted keys, UTF-8."""
        return json.dumps(
            request.payload(), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")

    def _headers(self, request: TransferRequest, body: bytes) -> dict[str, str]:
        headers = {
            "User-Agent": "trustroute-webhook",
            **self.headers,
            "Content-Type": "application/json; charset=utf-8",
            "X-Trustroute-Request-Id": request.request_id,
        }
        if self.secret_env:
            secret = os.environ.get(self.secret_env)
            if not secret:
                raise WebhookError(
                    f"webhook {self.name!r}: environment variable "
                    f"{self.secret_env} (secret_env) is not set or empty"
                )
            headers[SIGNATURE_HEADER] = sign(body, secret)
        return headers

    def _post_once(self, body: bytes, headers: dict[str, str]) -> int:
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code >= 500 or exc.code in _RETRY_STATUSES:
                raise _Transient(f"HTTP {exc.code}") from None
            raise WebhookError(
                f"POST {redact_url(self.url)} was rejected with HTTP {exc.code}; not retried"
            ) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise _Transient(f"timed out after {self.timeout_s:g} s") from None
            raise _Transient(f"connection failed: {reason}") from None
        except TimeoutError:
            raise _Transient(f"timed out after {self.timeout_s:g} s") from None
        except (ConnectionError, OSError) as exc:
            raise _Transient(f"connection failed: {exc.__class__.__name__}") from None

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.info(
            "webhook %s: attempt %d to %s failed (%s); retrying",
            self.name,
            state.attempt_number,
            redact_url(self.url),
            exc,
        )

    def __call__(self, request: TransferRequest) -> int:
        """Deliver ``request``; returns the HTTP status, raises WebhookError on failure."""
        body = self.body(request)
        headers = self._headers(request, body)
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.backoff_s, max=self.max_backoff_s),
            retry=retry_if_exception_type(_Transient),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            status: int = retrying(self._post_once, body, headers)
        except _Transient as exc:
            raise WebhookError(
                f"POST {redact_url(self.url)} failed after {self.attempts} attempt(s): {exc}"
            ) from None
        log.debug(
            "webhook %s: delivered %s to %s (HTTP %d)",
            self.name,
            request.request_id,
            redact_url(self.url),
            status,
        )
        return status

    async def acall(self, request: TransferRequest) -> int:
        """Deliver from async code without blocking the event loop."""
        return await asyncio.to_thread(self, request)

    def describe(self) -> dict[str, Any]:
        """Safe-to-print settings (no secret, no query string)."""
        return {
            "name": self.name,
            "url": redact_url(self.url),
            "timeout_s": self.timeout_s,
            "attempts": self.attempts,
            "signed": bool(self.secret_env),
        }

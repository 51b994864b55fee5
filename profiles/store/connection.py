"""One connection to SurrealDB through the official SDK, embedded or remote.

Every statement goes through ``run``: parameters are always bound (``$name``), never
interpolated; statement errors become ``QueryFailed`` with the database's own message.
Remote connection failures are retried with bounded exponential backoff (tenacity) and
end in ``StoreUnavailableError``. The same SurrealQL runs embedded and against a server.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from surrealdb import Surreal
from surrealdb.errors import ConnectionUnavailableError
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from trustroute.profiles.store.errors import StoreError, StoreGone, StoreUnavailableError
from trustroute.profiles.store.location import StoreLocation

log = logging.getLogger(__name__)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionUnavailableError,
    ConnectionError,
    TimeoutError,
    OSError,
)
try:  # the websocket client's own connection errors, when it is installed
    from websockets.exceptions import WebSocketException

    TRANSIENT_ERRORS = (*TRANSIENT_ERRORS, WebSocketException)
except ImportError:  # pragma: no cover - websockets ships with the SDK
    pass


class QueryFailed(StoreError):
    """A statement was rejected by the database (ASSERT, type, parse, conflict)."""


class Connection:
    """Thread-safe wrapper around a blocking SDK connection."""

    def __init__(self, location: StoreLocation, *, namespace: str = "trustroute",
                 database: str = "trustroute", username: str | None = None,
                 password: str | None = None, retry_attempts: int = 5,
                 retry_max_wait_s: float = 2.0) -> None:
        self.location = location
        self.namespace = namespace
        self.database = database
        self._username = username if username is not None else os.environ.get(
            "TRUSTROUTE_DB_USER")
        self._password = password if password is not None else os.environ.get(
            "TRUSTROUTE_DB_PASS")
        self._attempts = retry_attempts if location.is_remote else 1
        self._max_wait = retry_max_wait_s
        self._lock = threading.Lock()
        self._db: Any = None
        self._files: tuple[int, int] | None = None  # (device, inode) of the embedded store

    def open(self) -> None:
        """Connect, sign in when credentials are given, select namespace and database."""
        self._with_retries(self._connect, "connect")

    def _connect(self) -> None:
        db: Any = Surreal(self.location.url)  # remote kinds connect on first request
        if self.location.is_remote and self._username:
            db.signin({"username": self._username, "password": self._password or ""})
        db.use(self.namespace, self.database)
        self._db = db
        if self.location.path is not None:
            self._files = _identity(self.location.path)

    def _with_retries(self, action: Any, what: str) -> Any:
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential(multiplier=0.1, max=self._max_wait),
                retry=retry_if_exception_type(TRANSIENT_ERRORS),
                reraise=not self.location.is_remote,
            ):
                with attempt:
                    return action()
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise StoreUnavailableError(
                f"could not {what} to SurrealDB at {self.location.redacted()} after "
                f"{self._attempts} attempts: {cause}"
            ) from cause
        raise AssertionError("unreachable")  # pragma: no cover

    def run(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Run SurrealQL with bound ``params``; returns each statement's result."""
        if self._db is None:
            raise StoreError("the store is closed")
        if self._files is not None and _identity(self.location.path) != self._files:
            raise StoreGone(
                f"the embedded store at {self.location.path} was deleted or replaced while "
                "it was open; nothing more is written to it. Close this router and open it "
                "again (a deleted store starts empty)")

        def call() -> Any:
            with self._lock:
                return self._db.query_raw(sql, params or {})

        try:
            # An embedded engine has no transient failures to retry: call it directly
            # (a tenacity round costs about 20 us of a 600 us one-record write).
            response = (self._with_retries(call, "query") if self.location.is_remote
                        else call())
        except RuntimeError as exc:
            if isinstance(exc, StoreError):
                raise
            raise QueryFailed(str(exc)) from exc
        if "error" in response:
            raise QueryFailed(str(response["error"]))
        statements = response.get("result", [])
        errors = [s["result"] for s in statements if s.get("status") != "OK"]
        if errors:
            specific = [e for e in errors if "failed transaction" not in str(e)]
            raise QueryFailed(str((specific or errors)[0]))
        return [s.get("result") for s in statements]

    def close(self) -> None:
        """Close the SDK connection (idempotent)."""
        with self._lock:
            if self._db is not None:
                try:
                    self._db.close()
                finally:
                    self._db = None


def _identity(path: Any) -> tuple[int, int] | None:
    """(device, inode) of an embedded store's folder, or None when it is gone."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino

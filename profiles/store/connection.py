"""One connection to SurrealDB through the official SDK, embedded or remote.

Every statement goes through ``run``: parameters are always bound (``$name``), never
interpolated, and hold no text the store could not send back (``params``); statement
errors become ``QueryFailed`` with the database's own message. The same SurrealQL runs
embedded and against a server. Faults, all retried with tenacity and all bounded:

- a query with a statement that lost a read or write conflict ("This transaction can be
  retried") runs again whole (later statements may have failed only because of it),
  embedded too, up to ``conflict_attempts`` tries with short random waits;
- a server that cannot be reached when the store opens is retried ``retry_attempts``
  times (waits growing to ``retry_max_wait_s``), then ``StoreUnavailableError``;
- a connection that drops while the store is open is replaced: a new SDK connection,
  signed in and ``use``d again, retried for up to ``reconnect_timeout_s`` (a server
  restart costs retries, not a dead router);
- refused credentials raise ``StoreAuthError`` at once, naming the URL (password masked)
  and where credentials come from;
- every request to a server has a deadline, ``request_timeout_s`` plus
  ``request_timeout_per_row_s`` for each item of its bound lists (a batch of rows): a
  server that does not answer by then raises ``StoreUnavailableError`` at once (waiting
  again would only double the wait), its socket is dropped, and the next call opens a
  new one. Opening a connection is bounded the same way, and ``close()`` too (see
  ``wire``, which also keeps credentials out of the ``websockets`` DEBUG logs);
- a connection opened before ``os.fork()`` fails in the child (``StoreForkedError``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from surrealdb import Surreal
from surrealdb.connections.blocking_ws import BlockingWsSurrealConnection
from surrealdb.errors import ConnectionUnavailableError, ServerError
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random_exponential,
)
from websockets.exceptions import WebSocketException

from trustroute.profiles.store.credentials import WHERE, Credentials, sdk_url
from trustroute.profiles.store.errors import (
    StoreAuthError,
    StoreError,
    StoreForkedError,
    StoreGone,
    StoreUnavailableError,
)
from trustroute.profiles.store.location import StoreLocation, redact_credentials
from trustroute.profiles.store.params import check_params
from trustroute.profiles.store.settings import StoreSettings
from trustroute.profiles.store.wire import (
    DeadlineHttp,
    RedactedLogger,
    discard,
    limit,
    open_socket,
)

log = logging.getLogger(__name__)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionUnavailableError,
    OSError,  # ConnectionError and TimeoutError among them
    WebSocketException,  # the SDK's websocket client (a dependency of the SDK)
)

#: The engine's words for a transaction that lost a conflict and may simply run again.
RETRYABLE = "can be retried"
#: What a server says when the signed-in user (or nobody) may not do something.
_REFUSED = ("Not enough permissions", "IAM error", "problem with authentication")

#: Open connections, so that a forked child can disown the ones it inherited.
_OPEN: weakref.WeakSet[Connection] = weakref.WeakSet()
#: The process that started the SDK's embedded engine. Its runtime is process-wide and
#: its threads do not survive a fork: a forked child that opens an embedded store hangs.
_ENGINE_PID: int | None = None


class QueryFailed(StoreError):
    """A statement was rejected by the database (ASSERT, type, parse, conflict)."""


class RetryableConflict(QueryFailed):
    """A transaction lost a read or write conflict; it changed nothing and may run again
    (raised only once the retries are used up)."""


class Connection:
    """Thread-safe wrapper around a blocking SDK connection that re-opens itself."""

    def __init__(self, location: StoreLocation, settings: StoreSettings | None = None
                 ) -> None:
        self.location = location
        self.settings = s = settings or StoreSettings()
        self._credentials = Credentials.of(location, s)  # the URL's, the settings', the env's
        self._backoff = wait_exponential(multiplier=0.1, max=s.retry_max_wait_s)
        self._lock = threading.Lock()
        self._db: Any = None
        self._broken = False  # the SDK connection dropped: replace it before the next call
        self._pid: int | None = None  # the process that opened the connection
        self._files: tuple[int, int] | None = None  # (device, inode) of the embedded store
        self._logger = RedactedLogger()  # the websockets logger of this connection's sockets

    # -- opening ---------------------------------------------------------------------
    def open(self) -> None:
        """Connect, sign in when credentials are given, select namespace and database."""
        global _ENGINE_PID
        self._pid = os.getpid()
        if not self.location.is_remote:
            if _ENGINE_PID is not None and self._pid != _ENGINE_PID:
                raise StoreForkedError(
                    f"the embedded SurrealDB engine was started in process {_ENGINE_PID} "
                    f"and this process ({self._pid}) is a child made from it by "
                    "os.fork(); the engine cannot run in a forked child. Open stores only "
                    "after the fork, in each worker (not at import time under gunicorn "
                    "--preload), or start workers with 'spawn'; see docs/deploy.md")
            _ENGINE_PID = self._pid
        attempts = self.settings.retry_attempts if self.location.is_remote else 1
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(attempts),
                wait=self._backoff,
                retry=retry_if_exception_type(TRANSIENT_ERRORS)
                & retry_if_not_exception_type(TimeoutError),
                reraise=not self.location.is_remote,
            ):
                with attempt, self._lock:
                    self._db = self._connect()
        except TimeoutError as exc:  # it accepted and did not answer: waiting again won't help
            raise self._late(self.settings.request_timeout_s) from exc
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise StoreUnavailableError(
                f"could not connect to SurrealDB at {self.location.redacted()} after "
                f"{attempts} attempts: {redact_credentials(str(cause))}") from cause
        except StoreError:
            raise
        except RuntimeError as exc:  # the embedded engine could not open its files
            raise StoreUnavailableError(
                f"could not open the store at {self.location.redacted()}: "
                f"{str(exc).splitlines()[0]}") from exc
        if self.location.path is not None:
            self._files = _identity(self.location.path)
        _OPEN.add(self)

    def _connect(self) -> Any:
        """A new SDK connection, signed in and ``use``d (the caller holds the lock);
        against a server all of it within ``request_timeout_s``."""
        timeout = self.settings.request_timeout_s
        url = sdk_url(self.location)
        db: Any = (DeadlineHttp(url, timeout) if self.location.scheme in ("http", "https")
                   else Surreal(url))  # remote kinds connect on first request
        if self.location.scheme in ("ws", "wss") and isinstance(
                db, BlockingWsSurrealConnection):  # the SDK uses the socket it is given
            db.socket = open_socket(db.raw_url, timeout, self._logger)
        user = self._credentials.username
        step = f"the sign-in of user {user!r}"
        try:
            with limit(db, timeout):
                if self.location.is_remote and user:
                    self._logger.signing_in = True
                    try:
                        db.signin({"username": user,
                                   "password": self._credentials.password or ""})
                    finally:
                        self._logger.signing_in = False
                namespace, database = self.settings.namespace, self.settings.database
                step = f"namespace {namespace!r} / database {database!r}"
                db.use(namespace, database)
        except BaseException as exc:
            discard(db)
            if isinstance(exc, ServerError):
                raise self._refused(step, exc) from None
            raise
        return db

    def _late(self, timeout: float) -> StoreUnavailableError:
        """The error for a server that accepted a request and did not answer in time."""
        return StoreUnavailableError(
            f"SurrealDB at {self.location.redacted()} did not answer within {timeout:g} s "
            "(store.request_timeout_s); the connection is dropped and the next call opens "
            "a new one")

    def timeout(self, params: dict[str, Any] | None = None, rows: int = 0) -> float:
        """The deadline of one request with bound ``params``: ``request_timeout_s``,
        plus ``request_timeout_per_row_s`` per item of its list parameters (a batch
        write takes time in proportion to its rows) and per one of ``rows`` more (the
        rows a statement moves inside the database)."""
        rows += sum(len(v) for v in (params or {}).values() if isinstance(v, list | tuple))
        return self.settings.request_timeout_s + rows * self.settings.request_timeout_per_row_s

    def _refused(self, what: str, reason: object) -> StoreAuthError:
        """The one-line error for credentials the server refused (or that are missing)."""
        said = " ".join(str(getattr(reason, "message", "") or reason).split())
        if self._credentials.username:
            hint = f"check the credentials given by {self._credentials.source}"
        else:
            hint = f"no credentials were given; give them as {WHERE}"
        return StoreAuthError(f"SurrealDB at {self.location.redacted()} refused {what} "
                              f"({said}); {hint}")

    # -- running ---------------------------------------------------------------------
    def run(self, sql: str, params: dict[str, Any] | None = None, *, rows: int = 0
            ) -> list[Any]:
        """Run SurrealQL with bound ``params``; returns each statement's result. ``rows``:
        how many rows it moves beyond those it is given (its deadline grows with them)."""
        check_params(bound := params or {})  # before anything is sent (see ``params``)
        # a dropped connection is re-opened only for a server; embedded, it is a real failure
        retryable: tuple[type[BaseException], ...] = (
            RetryableConflict, *(TRANSIENT_ERRORS if self.location.is_remote else ()))
        retrying = Retrying(stop=self._stop, wait=self._wait, reraise=True,
                            retry=retry_if_exception_type(retryable),
                            before_sleep=self._log_retry)
        try:
            return retrying(self._attempt, sql, bound, rows)
        except TRANSIENT_ERRORS as exc:
            waited = self.settings.reconnect_timeout_s  # 0: a reader that does not wait
            raise StoreUnavailableError(
                f"lost the connection to SurrealDB at {self.location.redacted()} and could "
                f"not re-open it{f' within {waited:g} s' if waited else ''}: "
                f"{redact_credentials(str(exc))}") from exc

    def pages(self, sql: str, params: dict[str, Any], batch: int
              ) -> Iterator[list[dict[str, Any]]]:
        """The rows of ``sql`` (a SELECT without LIMIT), ``batch`` at a time."""
        start = 0
        while True:
            page = self.run(f"{sql} LIMIT $n START $start;",
                            {**params, "n": batch, "start": start})[0]
            yield page
            if len(page) < batch:
                return
            start += batch

    def _attempt(self, sql: str, params: dict[str, Any], rows: int = 0) -> list[Any]:
        """One try: re-open a dropped connection, send, check every statement."""
        timeout = self.settings.request_timeout_s  # first for re-opening, if needed
        with self._lock:
            db = self._usable()
            try:
                if self._broken:
                    discard(db)
                    self._db = db = self._connect()
                    self._broken = False
                    log.info("re-opened the connection to %s", self.location.redacted())
                timeout = self.timeout(params, rows)
                with limit(db, timeout):
                    response = db.query_raw(sql, params)
            except TimeoutError as exc:  # not retried: it would only wait as long again
                self._broken = True
                discard(db)
                raise self._late(timeout) from exc
            except TRANSIENT_ERRORS:
                self._broken = self.location.is_remote
                raise
            except StoreError:
                raise
            except RuntimeError as exc:
                raise self._failed(str(exc)) from exc
        if "error" in response:
            error = response["error"]
            if isinstance(error, dict) and (error.get("kind") == "NotAllowed" or any(
                    word in str(error.get("message")) for word in _REFUSED)):
                raise self._refused("a query", error.get("message"))
            raise self._failed(str(error.get("message", error) if isinstance(error, dict)
                                   else error))
        statements = response.get("result", [])
        errors = [str(s["result"]) for s in statements if s.get("status") != "OK"]
        if errors:
            # a lost conflict first (see above); else the statement that failed says why
            specific = [e for e in errors if "failed transaction" not in e]
            message = next((e for e in errors if RETRYABLE in e), (specific or errors)[0])
            if self.location.is_remote and any(word in message for word in _REFUSED):
                raise self._refused("a query", message)
            raise self._failed(message)
        return [s.get("result") for s in statements]

    @staticmethod
    def _failed(message: str) -> QueryFailed:
        return (RetryableConflict if RETRYABLE in message else QueryFailed)(message)

    def _usable(self) -> Any:
        """The SDK connection, unless closed, crossed a fork, or its files are gone."""
        if self._pid is not None and os.getpid() != self._pid:
            raise StoreForkedError(
                f"this store ({self.location.redacted()}) was opened in process {self._pid} "
                f"and is used in process {os.getpid()}, a child made by os.fork(); a store "
                "or router cannot cross a fork. Open the router after the fork, in each "
                "worker (gunicorn: without --preload, or in a post_fork hook; uvicorn: "
                "the app's lifespan); see docs/deploy.md")
        if self._db is None:
            raise StoreError("the store is closed")
        if self._files is not None and _identity(self.location.path) != self._files:
            raise StoreGone(
                f"the embedded store at {self.location.path} was deleted or replaced while "
                "it was open; nothing more is written to it. Close this router and open it "
                "again (a deleted store starts empty)")
        return self._db

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold every statement back while entered (a snapshot reads the store's file
        sizes at a commit boundary this way; keep it to a moment)."""
        with self._lock:
            yield

    # -- the retry policy of run() ---------------------------------------------------
    def _stop(self, state: RetryCallState) -> bool:
        """Conflicts: ``conflict_attempts`` tries in all. A dropped connection: until
        ``reconnect_timeout_s`` would be exceeded."""
        if _conflict(state):
            return state.attempt_number >= self.settings.conflict_attempts
        waited = state.seconds_since_start or 0.0
        return waited + self._backoff(state) > self.settings.reconnect_timeout_s

    def _log_retry(self, state: RetryCallState) -> None:
        if state.attempt_number == 1:  # once per query: a conflict storm is not news
            error = state.outcome.exception() if state.outcome else None
            log.info("retrying a query on %s after: %s", self.location.redacted(),
                     redact_credentials(str(error)))

    def _wait(self, state: RetryCallState) -> float:
        """Short random waits for conflicts (the other writer is done within
        milliseconds), exponential ones up to ``retry_max_wait_s`` for a server."""
        if _conflict(state):
            return wait_random_exponential(multiplier=0.01,
                                           max=self.settings.retry_max_wait_s)(state)
        return self._backoff(state)

    def close(self) -> None:
        """Close the SDK connection (idempotent), within about ``request_timeout_s``
        twice even when the server is frozen: a call in progress gets that long to end,
        then its socket is dropped under it; the close handshake waits as long. In a
        forked child nothing of the parent's connection is touched (see ``_disown``):
        it is only forgotten."""
        held = self._lock.acquire(timeout=self.settings.request_timeout_s)
        try:
            db, self._db = self._db, None
            if db is not None and os.getpid() == self._pid:
                if held:
                    db.close()
                else:  # a call still waits on a server that does not answer
                    discard(db)
        finally:
            if held:
                self._lock.release()
        _OPEN.discard(self)

    def _disown(self) -> None:
        """In a child made by ``os.fork()``: the inherited SDK connection must never be
        closed or freed here. Closing a WebSocket would end the parent's session, and
        freeing the embedded engine waits forever for threads the child does not have
        (the child would hang at exit). So it is kept alive, and a lock a parent thread
        held at the fork is replaced."""
        self._lock = threading.Lock()
        if self._db is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._db))  # never freed here


def _disown_inherited() -> None:
    for conn in list(_OPEN):
        conn._disown()
    _OPEN.clear()


os.register_at_fork(after_in_child=_disown_inherited)


def _conflict(state: RetryCallState) -> bool:
    return state.outcome is not None and isinstance(state.outcome.exception(),
                                                    RetryableConflict)


def _identity(path: Any) -> tuple[int, int] | None:
    """(device, inode) of an embedded store's folder, or None when it is gone."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino

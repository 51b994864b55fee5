"""The Store: one SurrealDB database holding everything trustroute learns.

It opens the connection (taking the process lock for embedded on-disk paths), makes sure
the schema exists, and exposes one repository per concern (``executions`` here; later
issues add their own modules beside it). All SurrealQL lives in this package.
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from trustroute.profiles.store.connection import Connection
from trustroute.profiles.store.errors import StoreError
from trustroute.profiles.store.executions import SCHEMA as EXECUTIONS_SCHEMA
from trustroute.profiles.store.executions import ExecutionRepository
from trustroute.profiles.store.location import StoreLocation, parse_store_url
from trustroute.profiles.store.lock import PathLock, check_store_path
from trustroute.profiles.store.schema import ensure_schema
from trustroute.profiles.store.settings import StoreSettings
from trustroute.profiles.store.snapshot import SnapshotWriter
from trustroute.profiles.validation import validated

SCHEMA_PARTS: list[str] = [EXECUTIONS_SCHEMA]

R = TypeVar("R")


def register_schema(statements: str) -> None:
    """Add DEFINE statements (with IF NOT EXISTS) that every newly opened store runs."""
    if statements not in SCHEMA_PARTS:
        SCHEMA_PARTS.append(statements)


class Store:
    """A connected, schema-checked SurrealDB store."""

    def __init__(self, url: str | None = None, *, base_dir: Path | None = None,
                 **options: Any) -> None:
        """Open ``url`` (default: the embedded store in ``.trustroute/``); ``options``
        are the other ``StoreSettings`` fields (namespace, credentials, retries). Bad
        options raise ValueError on one line naming each key."""
        if not isinstance(url, str | None):
            raise TypeError(f"store must be a URL (mem://, surrealkv://PATH, ws://HOST:PORT) "
                            f"or a Store, got {type(url).__name__}")
        given = options if url is None else {**options, "url": url}
        self.settings = validated(StoreSettings, given, "store", "bad store options: ")
        self.location: StoreLocation = parse_store_url(self.settings.url, base_dir=base_dir)
        if self.location.path is not None:  # before the lock, which would leave PATH.lock
            check_store_path(self.location.path)
        self._lock = PathLock(self.location.path) if self.location.path else None
        self.conn = Connection(self.location, self.settings)
        self._reader: Store | None = None  # see reader()
        self._reader_lock = threading.Lock()
        self._closed = False
        #: snapshots for readers while this process holds an on-disk store (snapshot.py)
        self.snapshots: SnapshotWriter | None = None
        if self._lock:
            self._lock.acquire(self.settings.lock_wait_s)  # makes the parent folder too
        try:
            self.conn.open()
            self.schema_version = ensure_schema(self.conn, SCHEMA_PARTS)
        except BaseException:
            self.close()
            raise
        self.executions = ExecutionRepository(self.conn)
        self._repositories: dict[type[Any], Any] = {}
        self._defines = True  # repository() applies a repository's SCHEMA (not a reader)
        if self.location.path and self.settings.snapshot_interval_s > 0:
            self.snapshots = SnapshotWriter(self.location.path, self.conn.paused,
                                            self.settings.snapshot_interval_s)
            self.snapshots.start()

    def reader(self) -> Store:
        """This store on a connection of its own, for reads that must not wait behind
        this store's calls, nor hold them up (a router's log follower polls through it
        while ``record()`` writes). Opened on first use, closed with this store. An
        embedded store is its own reader: one process uses it and nothing is polled."""
        if not self.location.is_remote:
            return self
        with self._reader_lock:
            if self._closed:
                raise StoreError("the store is closed")
            if self._reader is None:
                reader = Store.__new__(Store)
                reader.settings, reader.location, reader._lock = \
                    self.settings, self.location, None
                # A look that cannot reach the server fails at once and the follower
                # looks again at its own period: no backoff delays it after a restart.
                reader.conn = Connection(self.location, self.settings.model_copy(
                    update={"reconnect_timeout_s": 0.0}))
                reader.conn.open()
                reader.schema_version = self.schema_version
                reader.executions = ExecutionRepository(reader.conn)
                reader._repositories, reader._reader = {}, None
                reader._defines = False  # reads only: this store defines the schema
                reader._reader_lock, reader._closed = threading.Lock(), False
                self._reader = reader
            return self._reader

    def repository(self, cls: type[R]) -> R:
        """The store's instance of a repository class, created on first use.

        A repository is a class taking the ``Connection``; its ``SCHEMA`` class attribute
        (idempotent DEFINE ... IF NOT EXISTS statements) is applied before first use, so
        each feature keeps its tables and queries in its own module.
        """
        if cls not in self._repositories:
            if self._defines and (schema := getattr(cls, "SCHEMA", "")):
                self.conn.run(schema)
            self._repositories[cls] = cls(self.conn)  # type: ignore[call-arg]
        return self._repositories[cls]

    @property
    def url(self) -> str:
        """The store URL without credentials."""
        return self.location.redacted()

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called: nothing more can be read or written."""
        return self._closed

    def now(self) -> datetime:
        """The database's clock (what ``stored_at`` stamps come from)."""
        moment: datetime = self.conn.run("RETURN time::now();")[-1]
        return moment

    def run(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Run bound SurrealQL (for repositories in this package)."""
        return self.conn.run(sql, params)

    def close(self) -> None:
        """Close the connection (and the reader's) and release the path lock
        (idempotent)."""
        with self._reader_lock:  # no reader is opened after this
            self._closed, reader = True, self._reader
        try:
            if snapshots := getattr(self, "snapshots", None):  # None in a reader()
                snapshots.stop()
            if reader is not None:
                reader.close()
            self.conn.close()
        finally:
            if self._lock:
                self._lock.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

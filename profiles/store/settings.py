"""Where the store lives and how to reach it: the ``store`` config key and ``Store``'s
options, one model with every default written once."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from trustroute.profiles.records import check_identifier
from trustroute.profiles.store.location import DEFAULT_STORE_URL, redact_credentials
from trustroute.profiles.validation import NumbersNotBools


class StoreSettings(NumbersNotBools):
    """Store URL, SurrealDB namespace/database, credentials and retry bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = DEFAULT_STORE_URL
    namespace: str = "trustroute"
    database: str = "trustroute"
    username: str | None = None
    password: str | None = Field(default=None, repr=False)
    #: Tries to reach a server when the store opens, waits growing up to retry_max_wait_s.
    #: 9: the waits (0.2 s doubling, at most 2 s) add up to about 9 s, so a worker that
    #: starts while its server restarts rides out what an open router does
    #: (reconnect_timeout_s, 10 s) instead of dying after 1.5 s.
    retry_attempts: int = Field(default=9, ge=1)
    retry_max_wait_s: float = Field(default=2.0, ge=0, allow_inf_nan=False)
    #: Tries of a transaction that lost a read or write conflict to a concurrent writer
    #: (embedded or server). The waits are random and short, 10 ms doubling per try up to
    #: retry_max_wait_s: the other writer has committed within milliseconds.
    conflict_attempts: int = Field(default=10, ge=1)
    #: How long an open store keeps re-opening a dropped server connection before a
    #: call fails: a server restart takes a few seconds, and 10 s stays well inside the
    #: request timeouts a caller usually has (gunicorn kills a silent worker after 30 s).
    reconnect_timeout_s: float = Field(default=10.0, ge=0, allow_inf_nan=False)
    #: The longest a server may take to answer one request (opening a connection
    #: counts as one) before the call fails with StoreUnavailableError; an idle
    #: connection is pinged as often, so a frozen server is noticed within twice it.
    #: trustroute's requests are answered in milliseconds; 10 s is a thousand times
    #: that, long enough for a loaded server, and a reconnect (reconnect_timeout_s) plus
    #: one late request still fail before gunicorn's 30 s kills a silent worker.
    request_timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    #: Added to request_timeout_s per row a request carries (an item of its bound
    #: lists: a record_many batch, an import): 2 ms, 500 rows/s, a quarter of the slowest
    #: commit measured (60,000 rows in 29 s on the test server), so a long write is
    #: never cut short and a hung one still ends in proportion to its size.
    request_timeout_per_row_s: float = Field(default=0.002, ge=0, allow_inf_nan=False)
    #: The longest a router takes to fold in what other processes recorded, once it is
    #: committed, without anyone calling refresh(): it reads the writers' counters four
    #: times per period. Embedded stores have one writing process and are not polled.
    sync_delay_s: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    #: Deprecated and ignored (schema 3): routers no longer re-read the log by stamp,
    #: they follow the writers' counters, so no look-back is needed. Still accepted, so
    #: that existing configs load; a warning says it has no effect.
    sync_lookback_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: A router writes its cached projection (what it folded, see docs/storage.md) at
    #: close() and after folding this many new rows: a process that is killed, never
    #: closed, leaves the next one at most about this many rows to fold on top of it.
    projection_every: int = Field(default=50_000, ge=1)
    #: An embedded on-disk store held by a process writes a read-only snapshot beside
    #: itself this often (seconds; only when it changed; 0: never), which the CLI's read
    #: commands show while the process holds the store. A snapshot copies the store's
    #: files on a background thread, so the interval bounds that I/O: once a minute is
    #: fresh enough to inspect a live app and cheap next to the writes themselves.
    snapshot_interval_s: float = Field(default=60.0, ge=0, allow_inf_nan=False)
    #: An embedded on-disk store held by another process is waited for this long (seconds)
    #: before the open fails: a `trustroute` command reading it lets go within seconds,
    #: and an app (re)starting meanwhile should not die of it. Read commands wait 0 (they
    #: read the holder's snapshot instead).
    lock_wait_s: float = Field(default=10.0, ge=0, allow_inf_nan=False)

    @field_validator("namespace", "database")
    @classmethod
    def _name(cls, value: str, info: Any) -> str:
        # a NUL or control character is kept in SurrealDB's keys and breaks every read
        return check_identifier(value, info.field_name)

    @field_validator("sync_lookback_s")
    @classmethod
    def _lookback_ignored(cls, value: float | None) -> float | None:
        if value is not None:
            warnings.warn("store.sync_lookback_s is deprecated and has no effect: routers "
                          "follow the writers' counters, not stamps (docs/storage.md)",
                          FutureWarning, stacklevel=2)
        return value

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The URL's user:password part is never shown (the password field is hidden)."""
        for name, value in super().__repr_args__():
            yield name, redact_credentials(value) if name == "url" else value

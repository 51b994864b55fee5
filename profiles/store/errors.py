"""Errors raised by the store, each naming what went wrong and what to do."""

from __future__ import annotations

from typing import Any


def _rebuilt(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    return cls.__new__(cls, *args)  # sets ``args``; pickle then restores the attributes


class PicklableError(Exception):
    """An error whose ``__init__`` builds its message from other values. Pickled (a
    worker process handing it back) as its message and attributes, so it arrives as it
    was raised; pickle's default would call ``__init__`` again with the message alone."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args), self.__dict__)


class StoreError(RuntimeError):
    """Base class of every store error."""


class StoreLockedError(StoreError):
    """An embedded store path is already open in another process."""


class StoreUnavailableError(StoreError):
    """A SurrealDB server could not be reached, even after retries, or an embedded
    store's files could not be opened (a full disk, for example)."""


class SchemaVersionError(StoreError):
    """The store was written by a newer trustroute with an unknown schema."""


class InvalidStoreURL(StoreError, ValueError):
    """The store URL has a scheme or shape trustroute does not support."""


class DuplicateRecord(StoreError, PicklableError):
    """``record()`` of a record id that is already stored: it was recorded once and this
    write changed nothing (a retry after a lost answer can treat it as done)."""

    def __init__(self, record_id: str) -> None:
        super().__init__(f"record_id {record_id!r} is already stored; it counts once and "
                         "this write changed nothing")
        self.record_id = record_id


class StoreGone(StoreError):
    """The embedded store's files were deleted or replaced while it was open."""


class StoreAuthError(StoreError):
    """A SurrealDB server refused the store's credentials (or needs some and got none)."""


class StoreForkedError(StoreError):
    """A store (or the router holding it) opened before ``os.fork()`` was used in the
    child; open it after the fork, in each worker."""

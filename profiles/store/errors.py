"""Errors raised by the store, each naming what went wrong and what to do."""

from __future__ import annotations


class StoreError(RuntimeError):
    """Base class of every store error."""


class StoreLockedError(StoreError):
    """An embedded store path is already open in another process."""


class StoreUnavailableError(StoreError):
    """A remote SurrealDB server could not be reached, even after retries."""


class SchemaVersionError(StoreError):
    """The store was written by a newer trustroute with an unknown schema."""


class InvalidStoreURL(StoreError, ValueError):
    """The store URL has a scheme or shape trustroute does not support."""

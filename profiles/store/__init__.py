"""Persistence in SurrealDB (embedded surrealkv/mem, or a server over ws/http)."""

from profiles.store.connection import QueryFailed
from profiles.store.errors import (
    InvalidStoreURL,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
)
from profiles.store.location import DEFAULT_STORE_URL, StoreLocation, parse_store_url
from profiles.store.store import Store, register_schema

__all__ = [
    "DEFAULT_STORE_URL",
    "InvalidStoreURL",
    "QueryFailed",
    "SchemaVersionError",
    "Store",
    "StoreError",
    "StoreLocation",
    "StoreLockedError",
    "StoreUnavailableError",
    "parse_store_url",
    "register_schema",
]

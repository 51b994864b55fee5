"""Persistence in SurrealDB (embedded surrealkv/mem, or a server over ws/http)."""

from trustroute.profiles.store.connection import QueryFailed
from trustroute.profiles.store.errors import (
    DuplicateRecord,
    InvalidStoreURL,
    SchemaVersionError,
    StoreAuthError,
    StoreError,
    StoreForkedError,
    StoreGone,
    StoreLockedError,
    StoreUnavailableError,
)
from trustroute.profiles.store.location import DEFAULT_STORE_URL, StoreLocation, parse_store_url
from trustroute.profiles.store.settings import StoreSettings
from trustroute.profiles.store.store import Store, register_schema

__all__ = [
    "DEFAULT_STORE_URL",
    "DuplicateRecord",
    "InvalidStoreURL",
    "QueryFailed",
    "SchemaVersionError",
    "Store",
    "StoreAuthError",
    "StoreError",
    "StoreForkedError",
    "StoreGone",
    "StoreLocation",
    "StoreLockedError",
    "StoreSettings",
    "StoreUnavailableError",
    "parse_store_url",
    "register_schema",
]

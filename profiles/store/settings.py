"""Where the store lives and how to reach it: the ``store`` config key and ``Store``'s
options, one model with every default written once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trustroute.profiles.store.location import DEFAULT_STORE_URL, redact_credentials


class StoreSettings(BaseModel):
    """Store URL, SurrealDB namespace/database, credentials and retry bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = DEFAULT_STORE_URL
    namespace: str = "trustroute"
    database: str = "trustroute"
    username: str | None = None
    password: str | None = Field(default=None, repr=False)
    retry_attempts: int = Field(default=5, ge=1)
    retry_max_wait_s: float = Field(default=2.0, ge=0, allow_inf_nan=False)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The URL's user:password part is never shown (the password field is hidden)."""
        for name, value in super().__repr_args__():
            yield name, redact_credentials(value) if name == "url" else value

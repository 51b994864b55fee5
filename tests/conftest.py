"""Shared fixtures: real embedded SurrealDB stores, in memory or on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trustroute.router import AgentRouter

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def router() -> Iterator[AgentRouter]:
    """A router over two agents on an in-memory store."""
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0) as r:
        yield r


@pytest.fixture
def kv_url(tmp_path: Path) -> str:
    """A fresh on-disk surrealkv store URL."""
    return f"surrealkv://{tmp_path / 'db'}"

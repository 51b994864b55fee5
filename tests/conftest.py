"""Shared fixtures: real embedded SurrealDB stores, in memory or on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from surreal_fixtures import Target, serve

from trustroute.router import AgentRouter

# No timed assertions: Hypothesis's per-example deadline (200 ms) fails a property test
# on a loaded machine, which says nothing about the property.
settings.register_profile("trustroute", deadline=None)
settings.load_profile("trustroute")

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


@pytest.fixture(name="surreal")
def surreal_fixture() -> Iterator[Target]:
    """The test server serving one request at a time (exact counts), or the real server
    named by ``TRUSTROUTE_TEST_SURREAL_URL`` (tests/surreal_fixtures.py)."""
    yield from serve(serialized=True)


@pytest.fixture(name="surreal_concurrent")
def surreal_concurrent_fixture() -> Iterator[Target]:
    """The test server running requests of different connections at once (conflicts)."""
    yield from serve(serialized=False)

"""pytest fixtures for tests against a SurrealDB server: the test server of
``surreal_server.py`` by default, or a real ``surreal start`` named by the environment.

``TRUSTROUTE_TEST_SURREAL_URL=ws://127.0.0.1:8000`` (with ``TRUSTROUTE_TEST_SURREAL_USER``
and ``TRUSTROUTE_TEST_SURREAL_PASS``, both ``root`` by default) runs the server tests
against that server instead; each test then works in a database of its own. Tests that
need the test server's knobs (dropping a connection after a commit, stopping and
restarting the server) skip there. tests/conftest.py serves them to every test module as
the fixtures ``surreal`` (one request at a time) and ``surreal_concurrent``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from surreal_server import SurrealTestServer, available

EXTERNAL_URL = os.environ.get("TRUSTROUTE_TEST_SURREAL_URL")


@dataclass(frozen=True)
class Target:
    """A server to test against: its URL, root credentials, a database of this test's
    own, and the test server itself when it is one (None for a real server)."""

    url: str
    user: str
    password: str
    database: str
    server: SurrealTestServer | None

    def options(self, **more: Any) -> dict[str, Any]:
        """``store_options`` (or ``Store`` keywords) for this target."""
        return {"username": self.user, "password": self.password,
                "database": self.database, **more}

    def env(self) -> dict[str, str]:
        """The environment of a worker process: credentials by the documented variables."""
        return {**os.environ, "TRUSTROUTE_DB_USER": self.user,
                "TRUSTROUTE_DB_PASS": self.password}

    @property
    def fixture(self) -> SurrealTestServer:
        """The test server, for tests that use its knobs (they skip on a real server)."""
        if self.server is None:
            pytest.skip("needs the test server's knobs (tests/surreal_server.py)")
        return self.server


def serve(*, serialized: bool = True) -> Iterator[Target]:
    """The body of a fixture: a fresh test server (``serialized``: one request at a
    time, for exact counts; otherwise requests of different connections run at once, so
    writers conflict), or the real server of the environment (the body of the
    ``surreal`` and ``surreal_concurrent`` fixtures of tests/conftest.py)."""
    database = f"test_{uuid.uuid4().hex[:12]}"
    if EXTERNAL_URL:
        yield Target(EXTERNAL_URL, os.environ.get("TRUSTROUTE_TEST_SURREAL_USER", "root"),
                     os.environ.get("TRUSTROUTE_TEST_SURREAL_PASS", "root"), database, None)
        return
    if not available():
        pytest.skip("this surrealdb build has no embedded engine to serve")
    with SurrealTestServer(serialized=serialized) as server:
        yield Target(server.url, "root", "root", database, server)

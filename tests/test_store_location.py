"""Store URLs, the default location, and bounded retries against an unreachable server."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from trustroute.profiles.store import (
    DEFAULT_STORE_URL,
    InvalidStoreURL,
    Store,
    StoreUnavailableError,
    parse_store_url,
)
from trustroute.profiles.store.connection import Connection


def test_embedded_urls_resolve_to_absolute_paths(tmp_path: Path) -> None:
    loc = parse_store_url("surrealkv://data/db", base_dir=tmp_path)
    assert loc.scheme == "surrealkv"
    assert loc.path == tmp_path / "data" / "db"
    assert loc.url == f"surrealkv://{tmp_path / 'data' / 'db'}"
    assert loc.is_on_disk and not loc.is_remote
    absolute = parse_store_url(f"surrealkv://{tmp_path}/x")
    assert absolute.path == tmp_path / "x"


def test_default_store_is_project_local(tmp_path: Path) -> None:
    loc = parse_store_url(None, base_dir=tmp_path)
    assert DEFAULT_STORE_URL == "surrealkv://.trustroute/db"
    assert loc.path == tmp_path / ".trustroute" / "db"


@pytest.mark.parametrize("url", ["mem://", "memory://", "MEM://"])
def test_memory_urls(url: str) -> None:
    loc = parse_store_url(url)
    assert loc.url == "mem://" and loc.path is None and not loc.is_remote


@pytest.mark.parametrize("url", ["ws://127.0.0.1:8000", "wss://db.example.com/rpc",
                                 "http://localhost:8000", "https://db.example.com"])
def test_server_urls(url: str) -> None:
    loc = parse_store_url(url)
    assert loc.is_remote and loc.path is None and loc.url == url


@pytest.mark.parametrize(("url", "fragment"), [
    ("postgres://x", "not supported"),
    ("just-a-path", "must look like"),
    ("surrealkv://", "names no path"),
    ("ws://", "names no server host"),
])
def test_bad_urls_say_what_is_wrong(url: str, fragment: str) -> None:
    with pytest.raises(InvalidStoreURL, match=fragment):
        parse_store_url(url)


def test_credentials_never_appear_in_messages() -> None:
    loc = parse_store_url("wss://root:s3cret@db.example.com:8000/rpc")
    assert "s3cret" not in loc.redacted()
    assert loc.redacted() == "wss://***@db.example.com:8000/rpc"


def test_credentials_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUSTROUTE_DB_USER", "alice")
    monkeypatch.setenv("TRUSTROUTE_DB_PASS", "pw")
    conn = Connection(parse_store_url("ws://127.0.0.1:1"))
    assert (conn._username, conn._password) == ("alice", "pw")
    explicit = Connection(parse_store_url("ws://127.0.0.1:1"), username="bob", password="x")
    assert (explicit._username, explicit._password) == ("bob", "x")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_server_raises_after_bounded_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUSTROUTE_DB_PASS", "do-not-print-me")
    monkeypatch.setenv("TRUSTROUTE_DB_USER", "root")
    port = closed_port()
    attempts = 0
    real_connect = Connection._connect

    def counting(self: Connection) -> None:
        nonlocal attempts
        attempts += 1
        real_connect(self)

    monkeypatch.setattr(Connection, "_connect", counting)
    with pytest.raises(StoreUnavailableError) as info:
        Store(f"ws://127.0.0.1:{port}", retry_attempts=3, retry_max_wait_s=0.01)
    assert attempts == 3
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "after 3 attempts" in message
    assert "do-not-print-me" not in message

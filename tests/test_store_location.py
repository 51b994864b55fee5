"""Store URLs, the default location, and bounded retries against an unreachable server."""

from __future__ import annotations

import socket
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from surrealdb.data.cbor import decode, encode

from trustroute.profiles.store import (
    DEFAULT_STORE_URL,
    InvalidStoreURL,
    Store,
    StoreSettings,
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


@pytest.mark.parametrize(("url", "given"), [
    ("ws://127.0.0.1:8000/", "ws://127.0.0.1:8000"),
    ("wss://db.example.com/rpc/", "wss://db.example.com/rpc"),
    ("http://localhost:8000//", "http://localhost:8000"),
])
def test_server_urls_lose_trailing_slashes(url: str, given: str) -> None:
    """The SDK appends /rpc to the URL it is given: ws://host:8000/ would ask for //rpc."""
    assert parse_store_url(url).url == given


def test_retry_bounds_are_settings() -> None:
    settings = StoreSettings()
    assert (settings.retry_attempts, settings.retry_max_wait_s) == (9, 2.0)
    assert (settings.conflict_attempts, settings.reconnect_timeout_s) == (10, 10.0)
    with pytest.raises(ValueError, match="reconnect_timeout_s"):
        StoreSettings(reconnect_timeout_s=-1)


def test_bad_store_options_are_one_line_naming_each_key() -> None:
    with pytest.raises(ValueError) as caught:
        Store("mem://", request_timeout_s=-1, retry_atempts=3)
    message = str(caught.value)
    assert "\n" not in message
    assert "store.request_timeout_s: expected a value greater than 0, got -1" in message
    assert "store.retry_atempts: unknown key 'retry_atempts' (did you mean " \
        "'retry_attempts'?)" in message
    with pytest.raises(ValueError, match=r"store\.password") as caught:
        Store("mem://", password=["hunter22"])
    assert "hunter22" not in str(caught.value)


def test_credentials_never_appear_in_messages() -> None:
    loc = parse_store_url("wss://root:s3cret@db.example.com:8000/rpc")
    assert "s3cret" not in loc.redacted()
    assert loc.redacted() == "wss://***@db.example.com:8000/rpc"


class FakeSurrealServer:
    """A SurrealDB stand-in over HTTP on a real socket: answers every RPC and keeps them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = decode(self.rfile.read(int(self.headers["Content-Length"])))
                calls.append((body["method"], body.get("params")))
                result = "a-token" if body["method"] == "signin" else None
                reply = encode({"id": body["id"], "result": result})
                self.send_response(200)
                self.send_header("Content-Type", "application/cbor")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def signins(self) -> list[Any]:
        return [params for method, params in self.calls if method == "signin"]


@pytest.fixture
def surreal_server() -> Iterator[FakeSurrealServer]:
    server = FakeSurrealServer()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_credentials_come_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                               surreal_server: FakeSurrealServer) -> None:
    monkeypatch.setenv("TRUSTROUTE_DB_USER", "alice")
    monkeypatch.setenv("TRUSTROUTE_DB_PASS", "pw")
    conn = Connection(parse_store_url(surreal_server.url))
    conn.open()
    assert surreal_server.signins() == [[{"user": "alice", "pass": "pw"}]]
    assert ("use", ["trustroute", "trustroute"]) in surreal_server.calls
    conn.close()  # the HTTP client closes (the SDK's own had no close)
    explicit = Connection(parse_store_url(surreal_server.url),
                          StoreSettings(username="bob", password="x"))
    explicit.open()
    assert surreal_server.signins()[-1] == [{"user": "bob", "pass": "x"}]
    explicit.close()


def test_no_credentials_no_signin(monkeypatch: pytest.MonkeyPatch,
                                  surreal_server: FakeSurrealServer) -> None:
    monkeypatch.delenv("TRUSTROUTE_DB_USER", raising=False)
    monkeypatch.delenv("TRUSTROUTE_DB_PASS", raising=False)
    conn = Connection(parse_store_url(surreal_server.url))
    conn.open()
    assert surreal_server.signins() == []
    assert [method for method, _ in surreal_server.calls] == ["use"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def hanging_up_port() -> Iterator[tuple[int, list[int]]]:
    """A port that accepts connections and closes them at once; counts the connections."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = [0]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was closed
                return
            accepted[0] += 1
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield int(listener.getsockname()[1]), accepted
    listener.close()


def test_unreachable_server_raises_after_bounded_retries(
        monkeypatch: pytest.MonkeyPatch, hanging_up_port: tuple[int, list[int]]) -> None:
    monkeypatch.setenv("TRUSTROUTE_DB_PASS", "do-not-print-me")
    monkeypatch.setenv("TRUSTROUTE_DB_USER", "root")
    port, accepted = hanging_up_port
    with pytest.raises(StoreUnavailableError) as info:
        Store(f"ws://127.0.0.1:{port}", retry_attempts=3, retry_max_wait_s=0.01)
    assert accepted[0] == 3  # one connection per attempt, then no more
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "after 3 attempts" in message
    assert "do-not-print-me" not in message


def test_closed_port_raises_after_bounded_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUSTROUTE_DB_PASS", "do-not-print-me")
    port = closed_port()
    with pytest.raises(StoreUnavailableError) as info:
        Store(f"ws://127.0.0.1:{port}", retry_attempts=2, retry_max_wait_s=0.01)
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "after 2 attempts" in message
    assert "do-not-print-me" not in message


def test_a_deprecated_store_option_warns_where_users_see_it() -> None:
    # a DeprecationWarning raised inside pydantic is hidden by Python's default filters
    with warnings.catch_warnings():
        warnings.resetwarnings()  # the interpreter's defaults, not pytest's
        warnings.simplefilter("default")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        with warnings.catch_warnings(record=True) as seen:
            StoreSettings(sync_lookback_s=5)
    assert any("sync_lookback_s is deprecated" in str(w.message) for w in seen)


def test_a_store_path_that_cannot_be_made_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(StoreUnavailableError, match=r"could not open the embedded store at "
                                                    r".*afile/db: .*afile is a file, not a folder"):
        Store(f"surrealkv://{tmp_path / 'afile' / 'db'}")

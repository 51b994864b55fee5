"""A SurrealDB server for tests: the SDK's own engine behind the server's WebSocket RPC.

No SurrealDB server binary can be installed here, but the engine embedded in the SDK
(``surrealdb._surrealdb_ext.AsyncEmbeddedDB``) answers CBOR RPC requests exactly as a
server does at ``/rpc`` over WebSocket (subprotocol ``cbor``). This module puts one shared
engine behind a ``websockets`` server on 127.0.0.1, so the SDK's real ws client talks to
the real engine. What a server keeps per connection and the engine keeps once is tracked
here: the namespace and database of ``use`` and the variables of ``let`` (merged into
each query's parameters), and whether the connection signed in. Root credentials are
checked by the engine itself: the user is defined in it and ``signin`` is forwarded.

- ``serialized=True`` runs one request at a time (exact counts); ``False`` runs requests
  of different connections concurrently, so writers can conflict as on a real server.
- ``drop_after_commits(n)``: the next ``n`` writing queries (containing ``COMMIT``,
  ``CREATE`` or ``INSERT``) are executed and then the connection is cut without an
  answer (an ambiguous commit).
- ``stop()`` / ``start()`` close and re-open the listener on the same port (every
  connection is cut; the engine and its data stay, as with a restarted server on disk).
- ``delay_replies(seconds)``: every reply waits that long before it is sent (a slow
  server; connections wait side by side, not for each other).
- ``silence()`` / ``silence(False)``: requests are read and never answered (a server
  that hangs); connections, handshakes and pings still work. A frozen server, which
  answers nothing at all, is this module run as a process and stopped with SIGSTOP.
- ``shift_clock(seconds)``: a fake clock for the server process. Every ``time::now()``
  in the queries that follow reads the engine's clock plus ``seconds`` (negative: the
  clock stepped back); ``shift_clock(0)`` ends it.
- ``delay_commits(seconds, count, containing)``: each of the next ``count``
  transactions (whose text contains ``containing``) sleeps
  ``seconds`` right before its ``COMMIT`` (``SLEEP``, in the engine): its rows carry
  stamps taken long before they become visible, as with a slow batch.
- ``conflict_on(statement, count)``: in each of the next ``count`` queries that hold
  ``statement`` (its opening words), that statement does not run and is answered with
  a write conflict, as when another connection's commit won; the query's other
  statements run as sent.

As a fixture: ``with SurrealTestServer() as server: ... server.url``. As a separate OS
process: ``python tests/surreal_server.py --port N [--storage surrealkv://PATH]
[--concurrent] [--user root --password root] [--on-go]``; it prints its URL once it
listens and stops on SIGTERM or SIGINT. ``--on-go`` prints ``ready`` once Python and
its imports are up and opens its storage and listens only at a line on stdin: a restart
then costs what a server's own restart costs, not a loaded machine's Python start-up.
Written against surrealdb 2.0.0 (pinned in pyproject.toml).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeVar

from surrealdb.data.cbor import decode, encode
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

try:
    from surrealdb._surrealdb_ext import AsyncEmbeddedDB
except ImportError:  # pragma: no cover - another SDK build: tests using this skip
    AsyncEmbeddedDB = None

T = TypeVar("T")
AUTH_FAILED = {"code": -32002, "kind": "NotAllowed",
               "message": "There was a problem with authentication",
               "details": {"kind": "Auth", "details": {"kind": "InvalidAuth"}}}
NOT_ALLOWED = {"code": -32002, "kind": "NotAllowed",
               "message": "IAM error: Not enough permissions to perform this action",
               "details": {"kind": "Auth", "details": {"kind": "NotAllowed"}}}
#: a statement that lost a write conflict, as the engine answers it (outside BEGIN/COMMIT)
CONFLICT = ("The query was not executed due to a failed transaction. Failed to commit "
            "transaction due to a read or write conflict. This transaction can be retried")
_CONFLICTED = "conflict_on: this statement lost a write conflict"
_PLAIN = re.compile(r"[A-Za-z0-9_]+")


def available() -> bool:
    """True when the SDK build has the engine this server needs."""
    return AsyncEmbeddedDB is not None


@dataclass
class Session:
    """What a server keeps for one connection."""

    ns: str | None = None
    db: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    signed_in: bool = False


class EngineGate:
    """Lets requests run concurrently while they share the engine's namespace and
    database; one that needs another waits for them to finish, then switches."""

    def __init__(self, engine: Any, serialized: bool) -> None:
        self.engine = engine
        self.serialized = serialized
        self.current: tuple[str, str] | None = None
        self.running = 0
        self.changed = asyncio.Condition()

    async def execute(self, key: tuple[str, str] | None, request: bytes) -> bytes:
        async with self.changed:
            while self.running and (self.serialized or key not in (None, self.current)):
                await self.changed.wait()
            if key is not None and key != self.current:
                await self.engine.execute(encode({"id": 0, "method": "use",
                                                  "params": list(key)}))
                self.current = key
            self.running += 1
        try:
            return bytes(await self.engine.execute(request))
        finally:
            async with self.changed:
                self.running -= 1
                self.changed.notify_all()


class SurrealTestServer:
    """One engine served over WebSocket on 127.0.0.1 (see the module docstring)."""

    def __init__(self, *, port: int = 0, storage: str = "mem://", user: str | None = "root",
                 password: str = "root", serialized: bool = True) -> None:
        if AsyncEmbeddedDB is None:
            raise RuntimeError("this surrealdb build has no embedded engine "
                               "(surrealdb._surrealdb_ext.AsyncEmbeddedDB)")
        if user is not None and not (_PLAIN.fullmatch(user) and _PLAIN.fullmatch(password)):
            raise ValueError("test credentials must be letters, digits and underscores")
        self.port, self.storage, self.serialized = port, storage, serialized
        self.user, self.password = user, password
        self.connections = 0  # WebSocket connections accepted, over the server's life
        self.requests = 0  # RPC requests answered or dropped
        self.conflicts = 0  # answers that said "This transaction can be retried"
        self.delayed = 0  # transactions delay_commits has held back (counted as sent in)
        self._drops = 0
        self._reply_delay = 0.0  # seconds each reply waits (delay_replies)
        self._silent = False  # requests are read and never answered (silence)
        self._clock_shift = 0.0  # seconds added to time::now() (shift_clock)
        self._commit_delay = (0.0, 0, "")  # (seconds, transactions left, containing)
        self._conflict = ("", 0)  # (statement, queries left): conflict_on
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="surreal-test-server")
        self._server: Server | None = None
        self._clients: set[ServerConnection] = set()
        self._engine: Any = None
        self._gate: EngineGate | None = None

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:PORT`` (the SDK adds ``/rpc``)."""
        return f"ws://127.0.0.1:{self.port}"

    # -- life cycle ------------------------------------------------------------------
    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=30)

    def start(self) -> SurrealTestServer:
        """Listen (again) on the port; the first start opens the engine."""
        if not self._thread.is_alive():
            self._thread.start()
        self._call(self._start())
        return self

    def stop(self) -> None:
        """Stop listening and cut every connection; the engine keeps its data."""
        if self._thread.is_alive():
            self._call(self._stop())

    def close(self) -> None:
        """Stop, close the engine and end the server's thread."""
        if self._thread.is_alive():
            self._call(self._stop())
            self._call(self._close_engine())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def drop_after_commits(self, count: int = 1) -> None:
        """Cut the connection, unanswered, right after each of the next ``count``
        writing queries (COMMIT, CREATE or INSERT) has run."""
        self._drops = count

    def delay_replies(self, seconds: float) -> None:
        """Send every reply ``seconds`` after its request was answered (0: at once)."""
        self._reply_delay = seconds

    def silence(self, on: bool = True) -> None:
        """Read requests and never answer them (``False``: answer again)."""
        self._silent = on
    def shift_clock(self, seconds: float) -> None:
        """From now on ``time::now()`` in queries reads the clock plus ``seconds``."""
        self._clock_shift = float(seconds)

    def delay_commits(self, seconds: float, count: int = 1, containing: str = "") -> None:
        """The next ``count`` transactions (whose text contains ``containing``) wait
        ``seconds`` right before committing."""
        self._commit_delay = (float(seconds), count, containing)

    def conflict_on(self, statement: str, count: int = 1) -> None:
        """In the next ``count`` queries holding ``statement``, answer that statement
        (up to its ``;``) with a write conflict instead of running it."""
        self._conflict = (statement, count)

    def _rewrite(self, sql: str) -> str:
        """The query as the fake clock, the commit delay and conflict_on make it."""
        if self._clock_shift:
            sign = "+" if self._clock_shift > 0 else "-"
            sql = sql.replace("time::now()", f"(time::now() {sign} "
                              f"{abs(self._clock_shift) * 1000:.0f}ms)")
        delay, left, containing = self._commit_delay
        if left > 0 and "COMMIT TRANSACTION" in sql and containing in sql:
            self._commit_delay = (delay, left - 1, containing)
            self.delayed += 1
            sql = sql.replace("COMMIT TRANSACTION", f"SLEEP {delay * 1000:.0f}ms; "
                              "COMMIT TRANSACTION")
        statement, left = self._conflict
        if left > 0 and (start := sql.find(statement)) >= 0:
            self._conflict = (statement, left - 1)
            end = sql.find(";", start)
            sql = f"{sql[:start]}RETURN '{_CONFLICTED}'{sql[end if end >= 0 else len(sql):]}"
        return sql

    @staticmethod
    def _conflicted(answer: bytes) -> bytes:
        """The engine's answer with each statement ``_rewrite`` stood in for conflicting."""
        reply = decode(answer)
        for statement in reply.get("result") or []:
            if isinstance(statement, dict) and statement.get("result") == _CONFLICTED:
                statement.update(status="ERR", result=CONFLICT)
        return bytes(encode(reply))

    def __enter__(self) -> SurrealTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _start(self) -> None:
        if self._engine is None:
            self._engine = AsyncEmbeddedDB(self.storage)
            await self._engine.connect()
            self._gate = EngineGate(self._engine, self.serialized)
            if self.user is not None:  # plain text checked in __init__; no parameters here
                await self._engine.execute(encode({"id": 0, "method": "query", "params": [
                    f"DEFINE USER OVERWRITE {self.user} ON ROOT PASSWORD "
                    f"'{self.password}' ROLES OWNER;", {}]}))
        self._server = await serve(self._serve, "127.0.0.1", self.port, max_size=None,
                                   subprotocols=["cbor"],  # type: ignore[list-item]
                                   process_request=_only_rpc)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close(close_connections=False)
            for client in list(self._clients):  # a stopped process answers nothing more
                client.transport.abort()
            await self._server.wait_closed()
            self._server = None

    async def _close_engine(self) -> None:
        if self._engine is not None:
            await self._engine.close()
            self._engine = None

    # -- one connection --------------------------------------------------------------
    async def _serve(self, client: ServerConnection) -> None:
        self.connections += 1
        self._clients.add(client)
        session = Session(signed_in=self.user is None)
        try:
            async for frame in client:
                if self._silent:
                    continue  # a hung server: the request is never answered
                request = decode(frame if isinstance(frame, bytes) else frame.encode())
                reply = await self._answer(session, request, frame)
                if self._reply_delay:
                    await asyncio.sleep(self._reply_delay)
                self.requests += 1
                if reply is None:  # an ambiguous commit: done, but never answered
                    client.transport.abort()
                    return
                await client.send(reply)
        except ConnectionClosed:
            pass
        finally:
            self._clients.discard(client)

    async def _answer(self, session: Session, request: dict[str, Any],
                      frame: Any) -> bytes | None:
        ident, method = request.get("id"), request.get("method")
        params = list(request.get("params") or [])

        def result(value: Any = None) -> bytes:
            return bytes(encode({"id": ident, "result": value}))

        def error(body: dict[str, Any]) -> bytes:
            return bytes(encode({"id": ident, "error": body}))

        if method == "use":
            ns, db = [*params, None, None][:2]
            session.ns = ns if ns is not None else session.ns
            session.db = db if db is not None else session.db
            return result()
        if method == "let":
            session.vars[params[0]] = params[1]
            return result()
        if method == "unset":
            session.vars.pop(params[0], None)
            return result()
        if method == "invalidate":
            session.signed_in = self.user is None
            return result()
        if method in ("ping", "version"):
            return result(None if method == "ping" else "surrealdb-test-server")
        if method in ("signin", "authenticate"):
            try:
                answer = await self._execute(None, frame)
            except RuntimeError:
                return error(AUTH_FAILED)
            session.signed_in = True
            return answer
        if not session.signed_in:
            return error(NOT_ALLOWED)
        if session.ns is None or session.db is None:
            return error({"code": -32000, "kind": "Validation",
                          "message": "Specify a namespace and a database to use"})
        if method == "query" and len(params) > 1 and (
                session.vars or self._clock_shift or self._commit_delay[1]
                or self._conflict[1]):
            params[0] = self._rewrite(str(params[0]))
            params[1] = {**session.vars, **(params[1] if len(params) > 1 else {})}
            frame = encode({**request, "params": params})
        try:
            answer = await self._execute((session.ns, session.db), frame)
        except RuntimeError as exc:  # the engine raises what a server sends as an error
            return error({"code": -32000, "kind": "Internal", "message": str(exc)})
        if _CONFLICTED.encode() in answer:
            answer = self._conflicted(answer)
        if b"can be retried" in answer:
            self.conflicts += 1
        if (method == "query" and self._drops > 0 and params
                and any(word in str(params[0]).upper()
                        for word in ("COMMIT", "CREATE", "INSERT"))):
            self._drops -= 1
            return None
        return answer

    async def _execute(self, key: tuple[str, str] | None, frame: Any) -> bytes:
        assert self._gate is not None
        data = frame if isinstance(frame, bytes) else bytes(frame)
        return await self._gate.execute(key, data)


def _only_rpc(connection: ServerConnection, request: Request) -> Response | None:
    """Refuse every path but /rpc, as a SurrealDB server does."""
    if request.path.split("?", 1)[0] != "/rpc":
        return Response(HTTPStatus.NOT_FOUND.value, "Not Found", Headers(), b"not found\n")
    return None


def main(argv: list[str] | None = None) -> None:
    """Run the server as its own process until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--storage", default="mem://")
    parser.add_argument("--concurrent", action="store_true",
                        help="run requests of different connections concurrently")
    parser.add_argument("--user", default="root")
    parser.add_argument("--password", default="root")
    parser.add_argument("--no-auth", action="store_true", help="accept anyone")
    parser.add_argument("--clock-shift", type=float, default=0.0,
                        help="seconds added to time::now() in every query (a fake clock)")
    parser.add_argument("--on-go", action="store_true",
                        help="print 'ready', then open and listen at a line on stdin")
    args = parser.parse_args(argv)
    server = SurrealTestServer(port=args.port, storage=args.storage,
                               user=None if args.no_auth else args.user,
                               password=args.password, serialized=not args.concurrent)
    server.shift_clock(args.clock_shift)
    if args.on_go:  # SIGTERM meanwhile ends the process at once
        print("ready", flush=True)
        sys.stdin.readline()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with server:
        print(server.url, flush=True)
        done.wait()
    sys.stdout.flush()


if __name__ == "__main__":
    main()

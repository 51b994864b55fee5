"""The transports under the SDK's blocking connections: deadlines, keepalive, quiet logs.

The SDK's ``BlockingWsSurrealConnection`` sends a request with ``socket.send`` and waits
for its answer with ``socket.recv()``, without a timeout, and opens its socket with the
``websockets`` defaults (pings every 20 s, 20 s to answer one). A server that accepts a
request and never answers held a call, and the store's connection lock, for ever. So the
store opens that socket itself (``open_socket``) and hands it to the SDK, which uses a
socket it is given:

- ``DeadlineSocket`` ends every ``send`` and ``recv`` of a request by the request's
  deadline (``limit``): a late answer raises ``TimeoutError``, and the socket is then
  dropped (``discard``: an answer that arrives later must not be taken for the next
  request's);
- the handshake has the same bound (``open_timeout``), and closing waits at most that
  long for the server's side of the close handshake;
- keepalive pings go every ``request_timeout_s`` and must be answered within as long
  again (as a request's answer), so an idle connection to a frozen server is closed
  within twice that and the next call opens a new one;
- ``RedactedLogger`` is the ``websockets`` logger of these sockets: at DEBUG it would
  print the ``Authorization`` header (the URL's user:password) and the sign-in frames
  (the password going out, a session token coming back). Those are masked, nothing else.

Over ``http://`` the SDK posts each request with ``requests`` and a fixed 30 s timeout.
``DeadlineHttp`` is that connection with its requests sent by ``httpx`` instead, each
bounded by the request's deadline (``limit``, as for a socket): a server that does not
answer raises ``TimeoutError`` by then, an unreachable one ``ConnectionError``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Any

import httpx
import websockets
from surrealdb.connections.blocking_http import BlockingHttpSurrealConnection
from surrealdb.data.cbor import decode
from surrealdb.request_message.message import RequestMessage
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Data, DataLike

#: Request and response headers that carry credentials.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


class RedactedLogger(logging.LoggerAdapter[logging.Logger]):
    """The ``websockets.client`` logger of one store socket, credentials masked."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger("websockets.client"), {})
        #: True while signing in: the frames both ways carry a credential.
        self.signing_in = False

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        """Log with header values and sign-in frames masked (``websockets`` logs a
        header as ``("> %s: %s", name, value)`` and a frame as ``("> %s", frame)``)."""
        if not self.isEnabledFor(level):
            return
        if len(args) == 2 and str(args[0]).lower() in SECRET_HEADERS:
            args = (args[0], "***")
        elif self.signing_in:
            args = tuple(f"{a.opcode.name} [sign-in frame, {len(a.data)} bytes, not shown]"
                         if isinstance(a, Frame) else a for a in args)
        super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]
                ) -> tuple[Any, MutableMapping[str, Any]]:
        return msg, kwargs


#: A message up to this size is sent without a socket timeout: the request before it was
#: answered, so the kernel's buffers (far larger on every platform) are empty and the
#: send cannot block, even to a frozen peer. Saves two system calls per request.
SMALL_MESSAGE = 64 * 1024


class Deadline:
    """A connection whose requests inside ``limit`` end by one moment."""

    expires: float | None = None  # time.monotonic() by which the current request ends

    @contextlib.contextmanager
    def limit(self, seconds: float) -> Iterator[None]:
        """Every request inside ends ``seconds`` from now (``TimeoutError``)."""
        self.expires = time.monotonic() + seconds
        try:
            yield
        finally:
            self.expires = None
            self.limit_ended()

    def limit_ended(self) -> None:
        """Undo what the limited requests set up (nothing by default)."""

    def _left(self) -> float | None:
        return None if self.expires is None else max(0.0, self.expires - time.monotonic())


class DeadlineSocket(Deadline, ClientConnection):
    """A ``websockets`` client connection whose sends and receives end by a deadline."""

    timed_send = False  # the socket has a timeout for the current request's send

    def limit_ended(self) -> None:
        """A send given the request's timeout blocks without one again."""
        if self.timed_send:
            self.timed_send = False
            with contextlib.suppress(OSError):
                self.socket.settimeout(None)

    def send(self, message: DataLike | Iterable[DataLike], *, text: bool | None = None
             ) -> None:
        """Send; a peer that stops reading cannot block it past the deadline. A send cut
        short by the deadline raises ``TimeoutError``, as a late answer does: websockets
        reports it as a dropped connection, which the store would re-open and wait for
        as long again."""
        left = self._left()
        if left is not None and not (isinstance(message, bytes | bytearray | str)
                                     and len(message) <= SMALL_MESSAGE):
            self.timed_send = True
            self.socket.settimeout(max(left, 1e-3))
        try:
            super().send(message, text=text)
        except ConnectionClosed as exc:
            if self.timed_send and isinstance(exc.__cause__, TimeoutError) \
                    and self._left() == 0.0:
                raise TimeoutError("timed out sending a request") from exc
            raise

    def recv(  # type: ignore[override]  # its overloads only narrow the type by decode
            self, timeout: float | None = None, decode: bool | None = None) -> Data:
        """Receive the next message, by the deadline unless ``timeout`` says otherwise."""
        return super().recv(self._left() if timeout is None else timeout, decode)


def open_socket(url: str, timeout: float, logger: RedactedLogger) -> DeadlineSocket:
    """A WebSocket to the SDK's ``/rpc`` URL, as the SDK opens it (CBOR, no size
    limit), with the handshake, closing and keepalive bounded by ``timeout``."""
    ws = connect(url, max_size=None, subprotocols=[websockets.Subprotocol("cbor")],
                 open_timeout=timeout, close_timeout=timeout, ping_interval=timeout,
                 ping_timeout=timeout, create_connection=DeadlineSocket, logger=logger,
                 legacy=True)  # a connection, not the reconnecting iterator
    assert isinstance(ws, DeadlineSocket)
    return ws


class DeadlineHttp(Deadline, BlockingHttpSurrealConnection):
    """The SDK's blocking HTTP connection, each request sent by ``httpx`` and ended by
    its deadline (``request_timeout_s`` outside ``limit``)."""

    def __init__(self, url: str, timeout: float) -> None:
        super().__init__(url)
        self.timeout = timeout
        self.client = httpx.Client(timeout=timeout)

    def _send(self, message: RequestMessage, operation: str, bypass: bool = False
              ) -> dict[str, Any]:
        """The SDK's request (CBOR to ``/rpc``, its headers), by the deadline."""
        headers = {"Accept": "application/cbor", "Content-Type": "application/cbor"}
        for name, value in (("Authorization", self.token and f"Bearer {self.token}"),
                            ("Surreal-NS", self.namespace), ("Surreal-DB", self.database)):
            if value:
                headers[name] = value
        left = self.timeout if (rest := self._left()) is None else rest
        try:
            response = self.client.post(f"{self.url.raw_url}/rpc", headers=headers,
                                        content=message.WS_CBOR_DESCRIPTOR,
                                        timeout=max(left, 1e-3))
            response.raise_for_status()
        except httpx.TimeoutException as exc:
            raise TimeoutError(f"no answer within {max(left, 0):.3g} s") from exc
        except httpx.HTTPError as exc:  # refused, reset, or an HTTP error status
            raise ConnectionError(str(exc)) from exc
        answer: dict[str, Any] = decode(response.content)
        if not bypass:
            self.check_response_for_error(answer, operation)
        return answer

    def close(self) -> None:
        """Close the HTTP client (its pooled connections)."""
        self.client.close()


@contextlib.contextmanager
def limit(db: Any, seconds: float) -> Iterator[None]:
    """Requests of the SDK connection ``db`` inside end within ``seconds`` (when it
    runs on a ``DeadlineSocket`` or is a ``DeadlineHttp``; embedded: no limit, nothing
    to wait for)."""
    ws = getattr(db, "socket", None)
    if isinstance(ws, DeadlineSocket):
        with ws.limit(seconds):
            yield
    elif isinstance(db, DeadlineHttp):
        with db.limit(seconds):
            yield
    else:
        yield


def discard(db: Any) -> None:
    """Drop an SDK connection that failed: a server's socket at once, without waiting
    for the close handshake (the server may not be answering; nothing more is read)."""
    ws = getattr(db, "socket", None)
    if isinstance(ws, DeadlineSocket):
        with contextlib.suppress(OSError):
            ws.socket.shutdown(socket.SHUT_RDWR)  # close() then ends at once
    with contextlib.suppress(Exception):
        db.close()

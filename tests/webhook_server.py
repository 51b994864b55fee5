"""A real HTTP receiver on 127.0.0.1 for webhook tests: scripted replies, and signatures
checked with the Standard Webhooks reference package (``standardwebhooks``).

A script item is a status to answer, a delay in seconds before answering 200, a
``Redirect``, a ``Throttle`` (a status with ``Retry-After``) or a ``Trickle`` (a 200
whose status line and headers arrive one byte per interval). Every request is recorded,
whatever its method, so a test can assert that a host received nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

TRICKLED_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


@dataclass(frozen=True)
class Redirect:
    """Answer ``status`` with ``Location: location``."""

    location: str
    status: int = 302


@dataclass(frozen=True)
class Trickle:
    """Answer 200, sending the response one byte every ``interval_s`` seconds."""

    interval_s: float = 1.0


@dataclass(frozen=True)
class Throttle:
    """Answer ``status`` with ``Retry-After: after``."""

    after: str
    status: int = 429


Action = int | float | Redirect | Trickle | Throttle


@dataclass
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    signature_ok: bool | None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Replies with the scripted actions in order (the last one repeats)."""

    script: list[Action] = field(default_factory=lambda: [200])
    secret: str | None = None
    received: list[Received] = field(default_factory=list)
    url: str = ""
    stopped: threading.Event = field(default_factory=threading.Event)

    def next_action(self) -> Action:
        index = min(len(self.received) - 1, len(self.script) - 1)
        return self.script[index]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ok: bool | None = None
            if receiver.secret is not None:  # a whsec_ secret, as the sender's
                try:
                    Webhook(receiver.secret).verify(body, dict(self.headers))
                    ok = True
                except WebhookVerificationError:
                    ok = False
            seen = Received(self.command, self.path, dict(self.headers), body, ok)
            receiver.received.append(seen)
            action = receiver.next_action()
            if isinstance(action, Trickle):
                self.trickle(action.interval_s)
                return
            if isinstance(action, float):  # a delay in seconds: the client should time out
                time.sleep(action)
                action = 200
            if ok is False:
                action = 401
            if isinstance(action, Redirect):
                self.send_response(action.status)
                self.send_header("Location", action.location)
            elif isinstance(action, Throttle):
                self.send_response(action.status)
                self.send_header("Retry-After", action.after)
            else:
                self.send_response(int(action))
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_PUT = do_POST

        def trickle(self, interval_s: float) -> None:
            """Send the response a byte at a time until done, disconnected or shut down."""
            self.close_connection = True
            for i in range(len(TRICKLED_RESPONSE)):
                try:
                    self.wfile.write(TRICKLED_RESPONSE[i : i + 1])
                    self.wfile.flush()
                except OSError:  # the client gave up
                    return
                if receiver.stopped.wait(interval_s):
                    return

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def webhook_receiver(script: list[Action], secret: str | None = None) -> Iterator[Receiver]:
    """Serve on an ephemeral 127.0.0.1 port for the duration of the block."""
    receiver = Receiver(list(script), secret)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/handoff"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stopped.set()
        server.shutdown()
        server.server_close()

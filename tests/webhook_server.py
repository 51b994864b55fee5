"""A real HTTP receiver on 127.0.0.1 for webhook tests: scripted replies, HMAC checking."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One POST as the server saw it."""

    path: str
    headers: dict[str, str]
    body: bytes
    signature_ok: bool | None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Replies with the scripted statuses in order (the last one repeats)."""

    script: list[int | float] = field(default_factory=lambda: [200])
    secret: str | None = None
    received: list[Received] = field(default_factory=list)
    url: str = ""

    def next_action(self) -> int | float:
        index = min(len(self.received) - 1, len(self.script) - 1)
        return self.script[index]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ok: bool | None = None
            if receiver.secret is not None:
                expected = (
                    "sha256=" + hmac.new(receiver.secret.encode(), body, hashlib.sha256).hexdigest()
                )
                ok = hmac.compare_digest(expected, self.headers.get("X-Trustroute-Signature", ""))
            receiver.received.append(Received(self.path, dict(self.headers), body, ok))
            action = receiver.next_action()
            if isinstance(action, float):  # a delay in seconds: the client should time out
                time.sleep(action)
                action = 200
            if ok is False:
                action = 401
            self.send_response(int(action))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def webhook_receiver(script: list[int | float], secret: str | None = None) -> Iterator[Receiver]:
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
        server.shutdown()
        server.server_close()

"""Hand-offs with the receiver down: background delivery against synchronous delivery.

A ``HandoffRunnable`` whose every question is handed over, through the default webhook
hook (3 attempts, backoff 0.5 s, here a 1 s timeout) to a receiver on 127.0.0.1 that is
up (answers 200), refuses connections, or never answers in time. The reference is the
same run with the receiver up. ``delivery: sync`` is timed on a few tasks only (each
costs a whole failing delivery) and shown per task. Embedded store in a temporary folder.
"""

from __future__ import annotations

import logging
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from trustroute.integrations.langchain.handoff import HandoffRunnable
from trustroute.profiles.store import Store
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.transfer import TransferDispatcher, WebhookHook

TASKS = 80  # the workload
SYNC_TASKS = {"up": TASKS, "refused": 6, "timing out": 3}


@contextmanager
def receiver(delay_s: float | None) -> Iterator[str]:
    """A URL on 127.0.0.1: answering 200 after ``delay_s``, or refusing (None)."""
    if delay_s is None:
        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        yield f"http://127.0.0.1:{port}/hook"
        return

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def timed(url: str, delivery: str, tasks: int, folder: Path) -> tuple[float, float]:
    """Seconds for ``tasks`` hand-offs, and for close() after them."""
    vectors = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    vectors.add_texts(["How do I activate my card?", "Cards arrive in seven days."])
    with Store(f"surrealkv://{folder / delivery}-{tasks}-{time.monotonic_ns()}") as store:
        hook = WebhookHook(url, timeout_s=1.0)
        dispatcher = TransferDispatcher([hook], store=store, delivery=delivery)
        rag = HandoffRunnable(vectors, RunnableLambda(lambda x: "answer"), store=store,
                              confidence=RetrievalConfidence(score_threshold=2.0),
                              hooks=dispatcher)
        started = time.perf_counter()
        for i in range(tasks):
            rag.invoke(f"question {i}")
        took = time.perf_counter() - started
        closing = time.perf_counter()
        dispatcher.close(1.0)
        return took, time.perf_counter() - closing


def main() -> None:
    logging.getLogger("trustroute").setLevel(logging.CRITICAL)  # the failures are the point
    print(f"{TASKS} hand-offs through HandoffRunnable -> webhook (timeout 1 s, 3 attempts)")
    print(f"{'receiver':<12} {'delivery':<11} {'tasks':>5} {'total s':>8} {'per task':>9} "
          f"{'close s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, delay in (("up", 0.0), ("refused", None), ("timing out", 3.0)):
            with receiver(delay) as url:
                for delivery in ("background", "sync"):
                    tasks = TASKS if delivery == "background" else SYNC_TASKS[name]
                    took, closed = timed(url, delivery, tasks, Path(tmp))
                    print(f"{name:<12} {delivery:<11} {tasks:>5} {took:>8.2f} "
                          f"{took / tasks * 1000:>7.1f}ms {closed:>8.2f}", flush=True)
    print("reference: receiver up. Background delivery keeps the caller's time with the "
          "receiver down near it; close() waits at most its bound (here 1 s) and leaves "
          "the rest pending.")


if __name__ == "__main__":
    main()

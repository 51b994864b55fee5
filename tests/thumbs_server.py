"""A web worker for the thumbs test: a plain HTTP server on 127.0.0.1 whose endpoint
``POST /runs/<run_id>/feedback`` with ``{"approved": true}`` calls
``router.feedback(run_id, approved=...)`` (docs/feedback.md shows the FastAPI version).

``python tests/thumbs_server.py URL DATABASE``: opens its own AgentRouter on the server
URL, prints the port it listens on, and serves until stdin closes. Answers 204 when the
verdict is stored, 404 for a run no router recorded, 422 for a bad verdict.
Credentials come from TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trustroute import AgentRouter
from trustroute.router.errors import UnknownDecision

POLICY = {"wait_s": 3600, "default": "ignore"}


def main() -> None:
    url, database = sys.argv[1:3]
    with AgentRouter(agents=["a", "b"], store=url, feedback=POLICY,
                     store_options={"database": database, "sync_delay_s": 0.5}) as router:

        class Thumbs(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                parts = self.path.strip("/").split("/")
                if len(parts) != 3 or parts[0] != "runs" or parts[2] != "feedback":
                    return self.answer(404, "no such endpoint")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                try:
                    router.feedback(parts[1], approved=body.get("approved"),
                                    comment=body.get("comment"))
                except UnknownDecision:
                    return self.answer(404, f"no run {parts[1]}")
                except (TypeError, ValueError) as exc:
                    return self.answer(422, str(exc))
                return self.answer(204, "")

            def answer(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Thumbs)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        print(server.server_address[1], flush=True)
        sys.stdin.read()  # until the test closes our stdin
        server.shutdown()


if __name__ == "__main__":
    main()

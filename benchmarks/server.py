"""The benchmarks' database server: tests/surreal_server.py as its own OS process.

Benchmarks that measure several processes sharing a store (``shared_learning``,
``leases``) run against it, in concurrent mode on surrealkv storage in a temporary
folder, so the server's CPU is not the measuring process's. ``RAW_WRITE`` is the
reference unit of store cost they print beside ``record()``: one plain ``CREATE`` of an
execution row.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

SERVER = Path(__file__).resolve().parent.parent / "tests" / "surreal_server.py"
CREDENTIALS = {"username": "root", "password": "root"}
RAW_TABLE = "bench_raw"
RAW_WRITE = f"""
CREATE type::thing('{RAW_TABLE}', $r.record_id) CONTENT {{
    agent_id: $r.agent_id, task_type: $r.task_type, success: $r.success,
    quality: $r.quality, latency_ms: $r.latency_ms, timestamp: $r.timestamp,
    metadata: {{}}, stored_at: time::now(), pos: 0
}} RETURN stored_at;"""


def options(database: str) -> dict[str, Any]:
    return {**CREDENTIALS, "database": database}


class Server:
    """tests/surreal_server.py as its own process (concurrent, surrealkv)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.url = self._start(0)

    def _start(self, port: int) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "--port", str(port), "--concurrent",
             "--storage", f"surrealkv://{self.folder / 'server'}"],
            stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        url = self.proc.stdout.readline().strip()
        if not url.startswith("ws://"):
            self.close()
            raise RuntimeError(f"the test server did not start (said {url!r})")
        return url

    def restart(self, down_s: float) -> tuple[float, float]:
        """Stop the server process, wait ``down_s``, start it again on the same port
        and storage; returns the seconds it was not listening and time.time() when it
        listened again."""
        begin = time.monotonic()
        self.close()
        time.sleep(down_s)
        self._start(int(self.url.rsplit(":", 1)[1]))
        return time.monotonic() - begin, time.time()

    def cpu_s(self) -> float:
        """The server process's CPU time so far (Linux /proc; NaN elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def running_server(console: Console, prefix: str) -> Iterator[Server]:
    """Print the machine line, then run the server on a temporary folder for the block."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    console.print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at start; "
                  "server: tests/surreal_server.py --concurrent on surrealkv, its own "
                  "process")
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        server = Server(Path(tmp))
        try:
            yield server
        finally:
            server.close()

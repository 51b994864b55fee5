"""``trustroute import`` of a large JSONL log: peak memory and rows per second.

Writes a log of ``ROWS`` rows (default 1,000,000; ``IMPORT_STREAM_ROWS`` overrides) in a
temporary directory, 20 agents x 10 task types, a third of the rows without
``record_id`` (their ids are derived from content), then runs in separate processes:

- the reference: a process that only reads the file and parses each line with ``json``;
- ``trustroute import FILE --json`` on a fresh embedded surrealkv store.

Each figure is the child's peak RSS and its wall time. The peak is the child's own
``VmHWM`` (Linux), which the child writes as it exits: ``ru_maxrss`` carries over fork
and exec, so every child reported at least this process's size (the reference and the
server import both showed this process's 1.3-1.4 GB before session 15). The import
streams the file twice (check, then write), so what it holds itself does not grow with
the file; the target is under 400 MB at 1,000,000 rows. The embedded surrealkv engine
keeps an index of every key in memory, which does grow with the store, so a third
child only opens the imported store: the import's own cost is the difference.
Last, the same import into a SurrealDB server (``tests/surreal_server.py`` as its own
process, on surrealkv): there the engine's memory is the server's, and the import
process holds only what trustroute itself keeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = int(os.environ.get("IMPORT_STREAM_ROWS", "1000000"))
TARGET_MB = 400.0

PARSE_ONLY = """
import json, sys
with open(sys.argv[1], encoding="utf-8") as handle:
    rows = sum(1 for line in handle if json.loads(line))
print(rows)
"""

OPEN_ONLY = """
import sys
from trustroute.router import AgentRouter
with AgentRouter(store=sys.argv[1]) as router:
    print(sum(p.executions_total for p in router.profiles()))
"""

IMPORT = """
import sys
from trustroute.router.cli.app import main
raise SystemExit(main(sys.argv[1:]))
"""


def write_log(path: Path, rows: int) -> None:
    """``rows`` JSONL rows; every third has no record_id."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            row: dict[str, object] = {
                "agent_id": f"agent-{i % 20}", "task_type": f"task-{i % 10}",
                "success": i % 7 != 0, "quality": round((i % 100) / 100, 2),
                "latency_ms": 100 + i % 900, "cost": 0.001 * (i % 13),
                "timestamp": 1_735_689_600 + i, "metadata": {"run": i, "tag": "bench"}}
            if i % 3:
                row["record_id"] = f"bench-{i}"
            handle.write(json.dumps(row) + "\n")


# Prepended to a child's script: at exit it writes its own peak RSS (VmHWM, KiB), which
# belongs to the memory it mapped after exec, to the file HWM_FILE names.
PEAK_AT_EXIT = """
import atexit as _atexit, os as _os
def _peak():
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(_os.environ["HWM_FILE"], "w") as out:
        out.write(kib)
_atexit.register(_peak)
"""


def child(script: str, *args: str) -> tuple[float, float, str]:
    """Run ``python -c script args`` alone; (peak RSS in MB, wall seconds, stdout).

    The peak is the child's VmHWM where /proc has it, else ``ru_maxrss`` of
    ``os.wait4`` (which also counts this process's size at the fork)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out, \
            tempfile.TemporaryDirectory() as tmp:
        hwm = Path(tmp) / "hwm"
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", PEAK_AT_EXIT + script, *args],
                                stdout=out, stderr=subprocess.DEVNULL,
                                env={**os.environ, "HWM_FILE": str(hwm)})
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
        kib = int(hwm.read_text()) if hwm.exists() else usage.ru_maxrss  # KiB on Linux
    if proc.returncode:
        raise SystemExit(f"child failed with exit code {proc.returncode}: {text[-500:]}")
    return kib / 1024, seconds, text


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        start = time.perf_counter()
        write_log(log, ROWS)
        size_mb = log.stat().st_size / 1e6
        print(f"log: {ROWS:,} rows, {size_mb:.0f} MB, written in "
              f"{time.perf_counter() - start:.1f} s")
        ref_rss, ref_s, _ = child(PARSE_ONLY, str(log))
        print(f"reference (json.loads per line only): peak RSS {ref_rss:,.0f} MB, "
              f"{ref_s:.1f} s, {ROWS / ref_s:,.0f} rows/s")
        store = f"surrealkv://{Path(tmp) / 'db'}"
        rss, seconds, out = child(IMPORT, "import", str(log), "--store", store, "--json",
                                  "--batch-size", "1000")
        summary = json.loads(out)
        print(f"trustroute import: peak RSS {rss:,.0f} MB, {seconds:.1f} s, "
              f"{ROWS / seconds:,.0f} rows/s, imported {summary['imported']:,} "
              f"(target: under {TARGET_MB:.0f} MB)")
        print(f"import / reference: {rss / ref_rss:.1f}x the memory, "
              f"{seconds / ref_s:.1f}x the time")
        open_rss, open_s, count = child(OPEN_ONLY, store)
        print(f"store footprint (a process that only opens the imported store): peak RSS "
              f"{open_rss:,.0f} MB, {open_s:.1f} s, {int(count):,} executions; the import "
              f"adds {rss - open_rss:,.0f} MB to it")
        server, url = start_server(Path(tmp) / "server")
        try:
            rss, seconds, out = child(IMPORT, "import", str(log), "--store", url, "--json",
                                      "--batch-size", "1000")
        finally:
            server.terminate()
            server.wait(timeout=60)
        summary = json.loads(out)
        verdict = "PASS" if rss < TARGET_MB else "MISS"
        print(f"trustroute import into a server: peak RSS {rss:,.0f} MB (the import process; "
              f"target: under {TARGET_MB:.0f} MB: {verdict}), {seconds:.1f} s, "
              f"{ROWS / seconds:,.0f} rows/s, imported {summary['imported']:,}")


def start_server(path: Path) -> tuple[subprocess.Popen[str], str]:
    """The test server as its own process on a surrealkv store at ``path``; its URL."""
    server = Path(__file__).resolve().parent.parent / "tests" / "surreal_server.py"
    proc = subprocess.Popen([sys.executable, str(server), "--port", "0", "--storage",
                             f"surrealkv://{path}"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url:
        raise SystemExit("the test server did not start")
    os.environ.setdefault("TRUSTROUTE_DB_USER", "root")
    os.environ.setdefault("TRUSTROUTE_DB_PASS", "root")
    return proc, url


if __name__ == "__main__":
    main()

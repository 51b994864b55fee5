"""How long ``trustroute report`` takes on a store of 100,000 executions.

Bulk-imports synthetic executions (5 agents x 4 task types over 30 days, skills that
drift, ``router.record_many``) into an embedded surrealkv store, then times, each as
the real command in a fresh process: ``trustroute profiles --json`` (the reference:
opening the router and reading what it learned) and ``trustroute report`` (with and
without matplotlib's pictures), plus paging the whole execution log in time order with
``store.executions.iter_executions`` in this process (the report instead reads each
pair's executions in one indexed query). No target: the figures are printed side by side.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from trustroute.profiles.records import ExecutionRecord
from trustroute.router.router import AgentRouter

EXECUTIONS = 100_000
AGENTS = ("coder", "analyst", "writer", "generalist", "budget")
TASK_TYPES = ("code", "math", "writing", "support")
START = datetime(2025, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=30)


def synthetic(n: int, seed: int = 0) -> Iterator[ExecutionRecord]:
    """``n`` executions in time order; each pair's skill drifts linearly over the span."""
    rng = random.Random(seed)
    skill = {(a, t): (rng.uniform(0.3, 0.9), rng.uniform(-0.3, 0.3))
             for a in AGENTS for t in TASK_TYPES}
    for i in range(n):
        agent, task_type = rng.choice(AGENTS), rng.choice(TASK_TYPES)
        base, drift = skill[agent, task_type]
        quality = min(1.0, max(0.0, rng.gauss(base + drift * i / n, 0.1)))
        yield ExecutionRecord(agent_id=agent, task_type=task_type, success=quality >= 0.5,
                              quality=quality, latency_ms=rng.uniform(200, 3000),
                              timestamp=START + SPAN * (i / n))


def _timed_cli(*argv: str, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trustroute.router.cli.app", *argv], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"surrealkv://{tmp}/db"
        start = time.perf_counter()
        with AgentRouter(agents=list(AGENTS), store=url, seed=0) as router:
            router.record_many(list(synthetic(EXECUTIONS)), batch_size=1000)
        print(f"imported {EXECUTIONS:,} executions in {time.perf_counter() - start:.1f} s")
        with AgentRouter(store=url) as router:
            start = time.perf_counter()
            n = sum(1 for _ in router.store.executions.iter_executions(batch=5000))
            iterate = time.perf_counter() - start
        assert n == EXECUTIONS, n
        profiles = _timed_cli("profiles", "--json", "--store", url)
        out = Path(tmp) / "report.html"
        report = _timed_cli("report", "--store", url, "--out", str(out))
        hide = Path(tmp) / "hide"
        hide.mkdir()
        (hide / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
        tables = _timed_cli("report", "--store", url, "--out", str(Path(tmp) / "t.html"),
                            env={**os.environ, "PYTHONPATH": str(hide)})
        size = out.stat().st_size
    print(f"reference: iterate {n:,} executions  {iterate:6.2f} s (in process)")
    print(f"reference: trustroute profiles --json {profiles:6.2f} s")
    print(f"trustroute report (pictures)          {report:6.2f} s "
          f"({report / profiles:.1f}x profiles; {size / 1e6:.2f} MB)")
    print(f"trustroute report (tables only)       {tables:6.2f} s "
          f"({tables / profiles:.1f}x profiles)")


if __name__ == "__main__":
    main()

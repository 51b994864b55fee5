"""Shared limits (issue 18, item 4): what a lease in the store costs per call.

One run against the WebSocket test server (tests/surreal_server.py) as its own OS
process (concurrent mode, surrealkv storage in a temporary folder), one router on it;
every figure is timed in alternating blocks over the same connection, so they share the
machine's state:

- ``select()`` alone: in-memory ranking, no store round trip (the reference for what a
  decision costs without a lease);
- ``select(acquire=True)`` then ``release()``: one call's shared lease, taken (one
  request: count the live claims and write this one, then count again after it
  committed) and given back (the claim deleted). Against ``select()`` alone, the
  difference is the lease's cost per call;
- a raw ``CREATE`` of one execution row over the same connection (one round trip, the
  reference unit of store cost), and ``record()`` (what each call pays anyway);
- the same ``select(acquire=True)`` + ``release()`` on an embedded ``mem://`` store,
  beside ``select()`` there: embedded stores count in process, so the lease stays a
  dictionary update (no store work).

The renewal (one request per router every ``lease_ttl_s / 3`` for all its leases) is not
per call and is left out. Run: ``python -m benchmarks leases``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from benchmarks.foundation import Latency, verdict
from benchmarks.server import RAW_TABLE, RAW_WRITE, Server, options, running_server
from trustroute.profiles.store.executions import SCHEMA as EXECUTIONS_SCHEMA
from trustroute.router import AgentRouter

console = Console(width=80)

AGENTS = [f"agent-{i}" for i in range(10)]  # max_concurrent 10 each (the default)
TASK_TYPE = "task"
BLOCKS, PER_BLOCK, WARMUP = 10, 100, 100
#: Two round trips (take, release) against one for a raw CREATE, plus the take doing a
#: little more than one write (two counts of a few rows): the lease should cost within 3x.
LEASE_TARGET = 3.0


def alternating(calls: dict[str, Callable[[], object]]) -> dict[str, Latency]:
    """Each call timed on its own, in alternating blocks of ``PER_BLOCK``."""
    for fn in calls.values():
        for _ in range(WARMUP):
            fn()
    samples: dict[str, list[int]] = {name: [] for name in calls}
    clock = time.perf_counter_ns
    for _ in range(BLOCKS):
        for name, fn in calls.items():
            out = samples[name]
            for _ in range(PER_BLOCK):
                start = clock()
                fn()
                out.append(clock() - start)
    return {name: Latency.of(values) for name, values in samples.items()}


def leased(router: AgentRouter) -> Callable[[], None]:
    def call() -> None:
        decision = router.select(TASK_TYPE, acquire=True)
        decision.release()
    return call


def bench_server(server: Server) -> dict[str, Latency]:
    with AgentRouter(AGENTS, store=server.url, store_options=options("leases"),
                     seed=0) as router:
        router.store.run(EXECUTIONS_SCHEMA.replace("execution", RAW_TABLE))
        counter = iter(range(10**9))

        def raw() -> None:
            router.store.run(RAW_WRITE, {"r": {
                "record_id": uuid.uuid4().hex, "agent_id": "agent-0", "task_type": TASK_TYPE,
                "success": True, "quality": 0.8, "latency_ms": 120.0,
                "timestamp": datetime.now(UTC), "pos": 0}})

        def record() -> None:
            router.record(agent_id=f"agent-{next(counter) % 10}", task_type=TASK_TYPE,
                          success=True, quality=0.8, latency_ms=120.0)

        return alternating({"select": lambda: router.select(TASK_TYPE),
                            "leased": leased(router), "raw": raw, "record": record})


def bench_embedded() -> dict[str, Latency]:
    with AgentRouter(AGENTS, store="mem://", seed=0) as router:
        return alternating({"select": lambda: router.select(TASK_TYPE),
                            "leased": leased(router)})


def main() -> None:
    with (running_server(console, "trustroute-leases-") as server,
          console.status("server: select, select + lease, raw CREATE, record ...")):
        remote = bench_server(server)
    with console.status("embedded: select, select + lease ..."):
        local = bench_embedded()

    lease = remote["leased"].p50 - remote["select"].p50
    raw = remote["raw"].p50
    table = Table(title="a shared lease per call, beside references (same run)")
    for column in ("measure", "p50", "p99", "vs CREATE"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    rows = [("server: select()", remote["select"]),
            ("server: select(acquire) + release", remote["leased"]),
            ("server: raw CREATE (1 round trip)", remote["raw"]),
            ("server: record()", remote["record"]),
            ("embedded: select()", local["select"]),
            ("embedded: select(acquire) + release", local["leased"])]
    for name, value in rows:
        table.add_row(name, f"{value.p50:.0f} us", f"{value.p99:.0f} us",
                      f"{value.p50 / raw:.2f}x")
    console.print(table)
    extra = local["leased"].p50 - local["select"].p50
    console.print(f"the shared lease (take + release) costs {lease:.0f} us per call at p50 "
                  f"= {lease / raw:.2f}x a raw CREATE (target <= {LEASE_TARGET}x: two round "
                  f"trips): {verdict(lease / raw <= LEASE_TARGET)}; embedded, the lease "
                  f"adds {extra:.1f} us (in process, no store work). "
                  f"{BLOCKS} alternating blocks of {PER_BLOCK} each.")


if __name__ == "__main__":
    main()

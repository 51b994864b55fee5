"""Shared learning (issue #10): several OS processes route and learn through one server.

One run against the WebSocket test server (tests/surreal_server.py), started as its own
OS process in concurrent mode on surrealkv storage in a temporary folder, so the
server's CPU is not this process's:

- throughput: 1, 2 and 4 worker processes, each with its own ``AgentRouter`` on the
  server URL and the same database, each doing ``PER_WORKER`` ``select()`` +
  ``record(decision)`` pairs from a common start; aggregate records/s = acknowledged
  records / wall time until the last worker is done, beside the 1-process figure of the
  same run. Then exactness: the rows stored and a fresh router's profile totals must
  both equal the number of records acknowledged;
- convergence: ``WRITERS`` writer processes each record one execution at a time (a
  pause of ``PAUSE_S`` between them, each its own task type) and note when each
  ``record()`` returned; ``RESTART_AFTER_S`` into the run the server process is stopped
  and started again on the same port and storage (down ``DOWN_S`` plus its start-up).
  An observer process, which never calls ``refresh()``, polls its router's profiles
  every 5 ms and notes when each record became visible there. Delay = visible -
  acknowledged; p50 and p99 beside the goal (p99 <= 2 s);
- ``record()`` p50 on the server beside a raw write over the same connection
  (``router.store.run``): one plain ``CREATE`` of the same row into a table with the
  execution table's schema and indexes, where ``record()`` sends one transaction (the
  ``CREATE`` and the bump of its writer's counter); alternating blocks (target <= 3x).

Clocks: durations use ``time.monotonic()`` (one system-wide clock on Linux and macOS);
convergence compares ``time.time()`` of two processes on one machine.
Run: ``python -m benchmarks shared`` (or ``shared_learning``).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import random
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.foundation import Latency, paired, verdict
from benchmarks.server import RAW_TABLE, RAW_WRITE, Server, options, running_server
from trustroute.profiles.store.executions import SCHEMA as EXECUTIONS_SCHEMA
from trustroute.router import AgentRouter

console = Console(width=80)

AGENTS = [f"agent-{i}" for i in range(10)]
TASK_TYPES = [f"task-{i}" for i in range(5)]
WORKERS = (1, 2, 4)
PER_WORKER = 500  # select() + record() pairs per worker process
WRITERS = 4  # convergence: writer processes
CONVERGE_RECORDS = 75  # per writer
PAUSE_S = 0.05  # between a writer's records
POLL_S = 0.005  # the observer's look at its profiles
RESTART_AFTER_S = 1.5  # into the convergence run, the server restarts
DOWN_S = 1.0  # how long it stays down (its start-up comes on top)
CONVERGE_GOAL_MS = 2000.0  # p99
RECORD_TARGET = 3.0
TIMEOUT_S = 120.0  # a worker that has not answered by then has failed


# -- 1. throughput and exactness -------------------------------------------------------
def throughput_worker(url: str, database: str, index: int, count: int, ready: Any,
                      start: Any, results: Any) -> None:
    """``count`` select() + record() pairs once ``start`` is set; puts
    (index, acknowledged, failed, end monotonic time, error or None)."""
    acked, failed, error = 0, 0, None
    try:
        rng = random.Random(index)
        with AgentRouter(agents=AGENTS, store=url, store_options=options(database),
                         seed=index) as router:
            ready.put(index)
            start.wait()
            for i in range(count):
                decision = router.select(TASK_TYPES[(i + index) % len(TASK_TYPES)])
                success = rng.random() < 0.8
                try:
                    router.record(decision, success=success,
                                  quality=rng.uniform(0.5, 1.0) if success else 0.2,
                                  latency_ms=rng.uniform(50, 500))
                    acked += 1
                except Exception as exc:  # counted, not acknowledged; the run goes on
                    failed += 1
                    error = f"{type(exc).__name__}: {exc}"
            end = time.monotonic()
    except Exception as exc:
        ready.put(index)
        end, error = time.monotonic(), f"{type(exc).__name__}: {exc}"
    results.put((index, acked, failed, end, error))


@dataclass(frozen=True, slots=True)
class Throughput:
    workers: int
    acked: int
    failed: int
    wall_s: float
    stored: int
    folded: int
    server_cpu_s: float
    errors: list[str]

    @property
    def rate(self) -> float:
        return self.acked / self.wall_s

    @property
    def exact(self) -> bool:
        return self.stored == self.folded == self.acked and not self.failed \
            and not self.errors


def bench_throughput(server: Server, workers: int) -> Throughput:
    database = f"throughput_{workers}"
    with AgentRouter(store=server.url, store_options=options(database)):
        pass  # the schema exists before the workers open, as in a deployment
    ctx = mp.get_context("spawn")
    ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=throughput_worker,
                         args=(server.url, database, i, PER_WORKER, ready, start, results))
             for i in range(workers)]
    for proc in procs:
        proc.start()
    for _ in procs:  # every router open (schema checked, log read) before the clock starts
        ready.get(timeout=TIMEOUT_S)
    cpu = server.cpu_s()
    begin = time.monotonic()
    start.set()
    answers = []
    for _ in procs:
        try:
            answers.append(results.get(timeout=TIMEOUT_S))
        except queue.Empty:  # a worker died without answering (exit codes below)
            break
    cpu = server.cpu_s() - cpu
    for proc in procs:
        proc.join(timeout=TIMEOUT_S)
    errors = [a[4] for a in answers if a[4]]
    errors += [f"worker process exited with code {p.exitcode} without answering"
               for p in procs[len(answers):]] if len(answers) < len(procs) else []
    acked = sum(a[1] for a in answers)
    wall = max((a[3] for a in answers), default=time.monotonic()) - begin
    with AgentRouter(agents=AGENTS, store=server.url, store_options=options(database)
                     ) as fresh:
        stored = fresh.store.executions.count()
        folded = sum(p.executions_total for p in fresh.profiles())
    return Throughput(workers, acked, sum(a[2] for a in answers), wall, stored, folded,
                      cpu, errors)


# -- 2. convergence --------------------------------------------------------------------
def writer(url: str, database: str, index: int, count: int, ready: Any, start: Any,
           acks: Any) -> None:
    """Records ``count`` executions of its own task type one at a time; puts (index, i,
    time.time() after record() returned) for each, then (index, None, 0.0)."""
    try:
        with AgentRouter(agents=AGENTS, store=url, store_options=options(database)
                         ) as router:
            ready.put("writer")
            start.wait()
            for i in range(count):
                try:
                    router.record(agent_id=AGENTS[0], task_type=f"converge-{index}",
                                  success=True, record_id=f"converge-{index}-{i}")
                except Exception:  # not acknowledged (the server was down too long)
                    continue
                acks.put((index, i, time.time()))
                time.sleep(PAUSE_S)
    finally:
        acks.put((index, None, 0.0))


def observer(url: str, database: str, writers: int, count: int, ready: Any, stop: Any,
             seen: Any) -> None:
    """Polls its own router's profiles (never refresh()) until every writer's ``count``
    executions are visible or ``stop`` is set; puts, per writer, the time.time() at
    which each one was first seen (a writer records one at a time, so the n-th of its
    task type seen is its record n)."""
    times: list[list[float]] = [[] for _ in range(writers)]
    try:
        with AgentRouter(agents=AGENTS, store=url, store_options=options(database)
                         ) as router:
            ready.put("observer")
            while any(len(t) < count for t in times) and not stop.is_set():
                for index, seen_so_far in enumerate(times):
                    total = router.profile(AGENTS[0], f"converge-{index}").executions_total
                    seen_so_far += [time.time()] * (total - len(seen_so_far))
                time.sleep(POLL_S)
    finally:
        seen.put(times)


@dataclass(frozen=True, slots=True)
class Convergence:
    delays_ms: list[float]  # visible - acknowledged
    since_back_ms: list[float]  # visible - max(acknowledged, server listening again)
    acked: int
    sync_delay_s: float
    down_s: float  # the server was not listening this long

    @staticmethod
    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def bench_convergence(server: Server) -> Convergence:
    database = "convergence"
    with AgentRouter(store=server.url, store_options=options(database)):
        pass  # the schema exists before the processes open
    ctx = mp.get_context("spawn")
    ready, acks, seen = ctx.Queue(), ctx.Queue(), ctx.Queue()
    start, stop = ctx.Event(), ctx.Event()
    procs = [ctx.Process(target=observer, args=(server.url, database, WRITERS,
                                                CONVERGE_RECORDS, ready, stop, seen))]
    procs += [ctx.Process(target=writer, args=(server.url, database, i, CONVERGE_RECORDS,
                                               ready, start, acks)) for i in range(WRITERS)]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=TIMEOUT_S)
    start.set()
    time.sleep(RESTART_AFTER_S)
    down, back = server.restart(DOWN_S)
    acked: dict[tuple[int, int], float] = {}
    done = 0
    while done < WRITERS:
        index, i, at = acks.get(timeout=TIMEOUT_S)
        if i is None:
            done += 1
        else:
            acked[(index, i)] = at
    deadline = time.monotonic() + 10.0  # ten bounds' worth for the last ones to show
    while time.monotonic() < deadline and seen.empty():
        time.sleep(0.05)
    stop.set()
    visible = seen.get(timeout=TIMEOUT_S)
    for proc in procs:
        proc.join(timeout=TIMEOUT_S)
    pairs = [(visible[index][i], at) for (index, i), at in sorted(acked.items())
             if i < len(visible[index])]
    delays = [(seen_at - at) * 1000 for seen_at, at in pairs]
    since_back = [(seen_at - (max(at, back) if seen_at >= back else at)) * 1000
                  for seen_at, at in pairs]
    with AgentRouter(store=server.url, store_options=options(database)) as probe:
        sync = probe.store.settings.sync_delay_s
    return Convergence(delays, since_back, len(acked), sync, down)


# -- 3. record() vs a raw write over the same connection -------------------------------
def bench_record(server: Server) -> tuple[Latency, Latency]:
    with AgentRouter(agents=AGENTS, store=server.url, store_options=options("latency"),
                     seed=0) as router:
        router.store.run(EXECUTIONS_SCHEMA.replace("execution", RAW_TABLE))
        counter = iter(range(10**9))

        def record() -> None:
            i = next(counter)
            router.record(agent_id=AGENTS[i % 10], task_type=TASK_TYPES[i % 5],
                          success=True, quality=0.8, latency_ms=120.0)

        def raw() -> None:
            i = next(counter)
            router.store.run(RAW_WRITE, {"r": {
                "record_id": uuid.uuid4().hex, "agent_id": AGENTS[i % 10],
                "task_type": TASK_TYPES[i % 5], "success": True, "quality": 0.8,
                "latency_ms": 120.0, "timestamp": datetime.now(UTC)}})

        return paired(record, raw, blocks=10, per_block=100, warmup=100)


# -- report ----------------------------------------------------------------------------
def main() -> None:
    with running_server(console, "trustroute-shared-") as server:
        runs = []
        for n in WORKERS:
            with console.status(f"{n} worker process(es) x {PER_WORKER} "
                                "select() + record() ..."):
                runs.append(bench_throughput(server, n))
        with console.status(f"convergence: {WRITERS} writers x {CONVERGE_RECORDS} "
                            f"records, one every ~{PAUSE_S * 1000:.0f} ms each, server "
                            f"restarted after {RESTART_AFTER_S:g} s ..."):
            converge = bench_convergence(server)
        with console.status("record() vs raw CREATE over the same connection ..."):
            rec, raw = bench_record(server)

    table = Table(title="throughput: one database, N worker processes (same run)")
    for column in ("procs", "acked", "wall", "rec/s", "vs 1", "srv CPU", "stored",
                   "folded", "exact"):
        table.add_column(column, justify="right")
    base = runs[0].rate
    for r in runs:
        table.add_row(str(r.workers), f"{r.acked:,}", f"{r.wall_s:.1f} s", f"{r.rate:,.0f}",
                      f"{r.rate / base:.2f}x", f"{r.server_cpu_s:.1f} s", f"{r.stored:,}",
                      f"{r.folded:,}", verdict(r.exact))
    console.print(table)
    console.print(f"each worker: its own AgentRouter, {PER_WORKER} select() + "
                  "record(decision); stored = rows in the log, folded = a fresh router's "
                  "profile totals; both must equal acked. srv CPU: the server process's "
                  "CPU time during the run.")
    for r in runs:
        if r.acked != r.workers * PER_WORKER or r.errors:
            console.print(f"[red]{r.workers} worker(s): {r.acked:,} of "
                          f"{r.workers * PER_WORKER:,} acknowledged, {r.failed} record() "
                          f"failed: {'; '.join(dict.fromkeys(r.errors))}[/red]")

    table = Table(title=f"convergence: {WRITERS} writers -> observer, server restarted "
                        "(no refresh())")
    for column in ("measure", "delay", "goal", "result"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    seen = len(converge.delays_ms)
    goal = f"<= {CONVERGE_GOAL_MS:.0f} ms"
    for name, values in (("acknowledged", converge.delays_ms),
                         ("ack or server back", converge.since_back_ms)):
        if seen:
            p99 = converge.pct(values, 0.99)
            table.add_row(f"p50 visible - {name}", f"{converge.pct(values, 0.5):.0f} ms",
                          "", "")
            judged = values is converge.since_back_ms  # the other includes the downtime
            table.add_row(f"p99 visible - {name}", f"{p99:.0f} ms", goal if judged else "",
                          verdict(p99 <= CONVERGE_GOAL_MS) if judged else "")
            table.add_row(f"max visible - {name}", f"{max(values):.0f} ms", "", "")
    table.add_row("records seen / acknowledged", f"{seen} / {converge.acked}", "",
                  verdict(seen == converge.acked))
    console.print(table)
    console.print(f"{WRITERS} writer processes, {CONVERGE_RECORDS} records each, one every "
                  f"~{PAUSE_S * 1000:.0f} ms; the server process was stopped "
                  f"{RESTART_AFTER_S:g} s in and listened again {converge.down_s:.1f} s later. "
                  "A record acknowledged before the restart but not yet seen cannot be "
                  "seen while the server is down: the second measure counts it from when "
                  "the server listened again, and the goal applies to it. "
                  f"sync_delay_s = {converge.sync_delay_s} (default): a router reads the "
                  f"writers' counters every {converge.sync_delay_s / 4:.2f} s.")

    table = Table(title="record() on the server vs a raw write (same connection)")
    for column in ("measure", "record()", "raw CREATE", "ratio", "target", "result"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    ratio = rec.p50 / raw.p50
    table.add_row("p50", f"{rec.p50:.0f} us", f"{raw.p50:.0f} us", f"{ratio:.2f}x",
                  f"<= {RECORD_TARGET}x", verdict(ratio <= RECORD_TARGET))
    table.add_row("p99", f"{rec.p99:.0f} us", f"{raw.p99:.0f} us",
                  f"{rec.p99 / raw.p99:.2f}x", "", "")
    console.print(table)
    console.print(f"raw: router.store.run() of one plain CREATE of the row into "
                  f"'{RAW_TABLE}' (the execution table's schema and indexes); record() "
                  "sends one transaction: that CREATE and its writer's counter bump. "
                  "10 alternating blocks of 100 each.")


if __name__ == "__main__":
    main()

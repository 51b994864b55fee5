"""Foundation: decision latency, write latency, bulk import rate and store open time.

Every figure is printed next to its reference, measured in the same run on the same
machine, so a loaded machine slows both sides alike:

- ``select()`` with 10 and with 100 trained agents vs one LangChain
  ``RouterRunnable.invoke`` hop over a trivial ``RunnableLambda`` (targets: p50 <= 0.5x
  with 10 agents, <= 3x with 100; both invisible next to any real agent call);
- ``record()`` on an embedded surrealkv store vs a raw write of the same row through the
  same SDK, on its own surrealkv store with the same ``execution`` table: one
  ``CREATE execution`` (what ``record()`` writes; target: p50 <= 3x),
  first on young profiles, then in steady state once every window is full (a window
  that grows makes each write bigger, so both are shown);
- ``select()`` with 100 agents on 100 task types while every pair has a run awaiting a
  verdict (``feedback`` ``wait_s`` > 0): the default strategy counts those runs as
  outcomes on their way on every task type (the "100 x 100" row: reported beside the
  hop; no target);
- bulk import: ``record_many`` of 20,000 records (10 agents x 5 task types, batches of
  5,000) into a fresh store (reported; no target);
- opening a store that holds 10,000 profiles (100 agents x 100 task types, 3 executions
  each): connect, check the schema, load every profile and window (target: < 1 s).

Every figure is measured twice, with the default (learning) strategy and with the
stateless ``confidence_weighted`` one (which times the store and the router alone), each
time beside its own reference, so the cost of learning is visible.

Samples of a measurement and its reference are taken in alternating blocks, so drifts in
machine load hit both. The two figures without a reference are wall-clock times, which a
busy machine inflates; their process CPU time is printed beside them as the figure other
processes disturb least (results are judged on wall-clock time).
Run: ``python -m benchmarks foundation``.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.router import RouterRunnable
from rich import box
from rich.console import Console
from rich.table import Table

from trustroute.profiles import ExecutionRecord
from trustroute.profiles.store.executions import SCHEMA as EXECUTIONS_SCHEMA
from trustroute.router import AgentRouter
from trustroute.router.strategies import DEFAULT_STRATEGY

console = Console(width=80)

SELECT_TARGETS = {10: 0.5, 100: 3.0}  # agents: p50 ratio to one RouterRunnable hop
RECORD_TARGET = 3.0
OPEN_TARGET_S = 1.0
REFERENCE_STRATEGY = "confidence_weighted"  # stateless: measures the store, not learning

RAW_WRITE = "CREATE type::thing('execution', $id) CONTENT $row RETURN NONE;"


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of one timed call, in microseconds."""

    p50: float
    p99: float

    @classmethod
    def of(cls, samples_ns: list[int]) -> Latency:
        ordered = sorted(samples_ns)
        return cls(ordered[len(ordered) // 2] / 1000,
                   ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1000)


def paired(first: Callable[[], object], second: Callable[[], object], *, blocks: int,
           per_block: int, warmup: int) -> tuple[Latency, Latency]:
    """Time two calls in alternating blocks; each call timed on its own."""
    for _ in range(warmup):
        first()
        second()
    samples: tuple[list[int], list[int]] = ([], [])
    clock = time.perf_counter_ns
    for _ in range(blocks):
        for fn, out in ((first, samples[0]), (second, samples[1])):
            for _ in range(per_block):
                start = clock()
                fn()
                out.append(clock() - start)
    return Latency.of(samples[0]), Latency.of(samples[1])


def trained_router(store: str, agents: list[str], task_type: str,
                   strategy: str = REFERENCE_STRATEGY) -> AgentRouter:
    """A router whose agents have 1..n executions of ``task_type`` with varied quality."""
    router = AgentRouter(agents=agents, store=store, seed=0, strategy=strategy)
    rng = random.Random(1)
    records = [ExecutionRecord(agent_id=agent, task_type=task_type, success=rng.random() < 0.8,
                               quality=rng.random())
               for i, agent in enumerate(agents) for _ in range(3 + 4 * (i % 10))]
    router.record_many(records)
    return router


def bench_select(strategy: str, n_agents: int) -> tuple[Latency, Latency]:
    agents = [f"agent-{i}" for i in range(n_agents)]
    with trained_router("mem://", agents, "code", strategy) as router:
        hop = RouterRunnable(runnables={"code": RunnableLambda(lambda x: x)})
        payload = {"key": "code", "input": "task"}
        per_block = 10_000 // n_agents
        return paired(lambda: router.select("code"), lambda: hop.invoke(payload),
                      blocks=20, per_block=per_block, warmup=2 * per_block)


def bench_select_awaiting(strategy: str, n_agents: int = 100, n_types: int = 100
                          ) -> tuple[Latency, Latency]:
    """select() when each (agent, task type) pair has 3 judged runs and 1 awaiting its
    verdict, vs the hop."""
    agents = [f"agent-{i}" for i in range(n_agents)]
    types = [f"task-{t}" for t in range(n_types)]
    rng = random.Random(4)
    with AgentRouter(agents=agents, store="mem://", seed=0, strategy=strategy,
                     feedback={"wait_s": 3600, "default": "ignore"}) as router:
        router.record_many(ExecutionRecord(agent_id=agent, task_type=task_type, success=True,
                                           quality=rng.random() if judged else None)
                           for judged in (True, True, True, False)
                           for agent in agents for task_type in types)
        hop = RouterRunnable(runnables={"code": RunnableLambda(lambda x: x)})
        payload = {"key": "code", "input": "task"}
        return paired(lambda: router.select("task-0"), lambda: hop.invoke(payload),
                      blocks=10, per_block=100, warmup=100)


def bench_record(workdir: Path, strategy: str) -> list[tuple[Latency, Latency]]:
    """record() vs the raw write twice: on young profiles (about 36 records per pair, as
    the measurement goes) and in steady state, once every pair's window is full."""
    from surrealdb import Surreal

    agents = [f"agent-{i}" for i in range(10)]
    raw = Surreal(f"surrealkv://{workdir / ('raw-' + strategy)}")
    raw.use("bench", "bench")
    raw.query_raw(EXECUTIONS_SCHEMA, {})
    counter = iter(range(10**9))

    def raw_write() -> None:
        i = next(counter)
        agent, task = agents[i % 10], f"task-{i % 5}"
        raw.query_raw(RAW_WRITE, {
            "id": str(uuid.uuid4()), "agent_id": agent, "task_type": task,
            "row": {"agent_id": agent, "task_type": task, "success": True, "quality": 0.8,
                    "latency_ms": 120.0, "cost": None, "timestamp": datetime.now(UTC),
                    "decision_id": None, "metadata": {}, "stored_at": datetime.now(UTC),
                    "pos": 0},
        })

    try:
        with AgentRouter(agents=agents, store=f"surrealkv://{workdir / ('record-' + strategy)}",
                         seed=0, strategy=strategy) as router:
            def record() -> None:
                i = next(counter)
                router.record(agent_id=agents[i % 10], task_type=f"task-{i % 5}",
                              success=True, quality=0.8, latency_ms=120.0)

            young = paired(record, raw_write, blocks=10, per_block=150, warmup=300)
            for _ in range(50 * router.settings.recency.window_size):
                record()
            steady = paired(record, raw_write, blocks=10, per_block=150, warmup=300)
            return [young, steady]
    finally:
        raw.close()


def synthetic(agents: int, task_types: int, per_pair: int, seed: int) -> list[ExecutionRecord]:
    """Records of every (agent, task type) pair, interleaved, timestamps over 30 days."""
    rng = random.Random(seed)
    start = datetime.now(UTC) - timedelta(days=30)
    pairs = [(f"agent-{a}", f"task-{t}") for a in range(agents) for t in range(task_types)]
    records = []
    for round_ in range(per_pair):
        for n, (agent, task) in enumerate(pairs):
            success = rng.random() < 0.7
            records.append(ExecutionRecord(
                agent_id=agent, task_type=task, success=success,
                quality=rng.uniform(0.5, 1.0) if success else rng.uniform(0.0, 0.5),
                latency_ms=rng.uniform(50, 2000), cost=rng.choice([None, 0.002, 0.01]),
                timestamp=start + timedelta(seconds=round_ * len(pairs) + n)))
    return records


def bench_bulk(workdir: Path, strategy: str) -> tuple[int, float, float]:
    records = synthetic(agents=10, task_types=5, per_pair=400, seed=2)
    agents = sorted({r.agent_id for r in records})
    with AgentRouter(agents=agents, store=f"surrealkv://{workdir / ('bulk-' + strategy)}",
                     strategy=strategy) as router:
        start, cpu = time.perf_counter(), time.process_time()
        written = router.record_many(records, batch_size=5000)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert written == len(records)
    return written, written / elapsed, written / cpu


def build_open_store(workdir: Path) -> tuple[str, list[str], int]:
    url = f"surrealkv://{workdir / 'open'}"
    records = synthetic(agents=100, task_types=100, per_pair=3, seed=3)
    agents = sorted({r.agent_id for r in records})
    with AgentRouter(agents=agents, store=url, strategy="confidence_weighted") as router:
        router.record_many(records, batch_size=5000)
    return url, agents, len(records)


def bench_open(url: str, agents: list[str], strategy: str) -> tuple[int, float, float]:
    timings, cpu_timings = [], []
    profiles = 0
    for _ in range(3):
        start, cpu = time.perf_counter(), time.process_time()
        router = AgentRouter(agents=agents, store=url, strategy=strategy)
        timings.append(time.perf_counter() - start)
        cpu_timings.append(time.process_time() - cpu)
        profiles = len(router.book)
        router.close()
    return profiles, statistics.median(timings), statistics.median(cpu_timings)


def verdict(ok: bool) -> str:
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


def strategy_table(name: str, selects: dict[tuple[str, int], tuple[Latency, Latency]],
                   awaiting: tuple[Latency, Latency], records: list[tuple[Latency, Latency]],
                   bulk: tuple[int, float, float], opened: tuple[int, float, float],
                   executions: int) -> Table:
    """One strategy's figures beside their references (fits 80 columns)."""
    kind = "default" if name == DEFAULT_STRATEGY else "stateless"
    table = Table(title=f"foundation: {name} ({kind}) vs references, same run",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("measure", "measured", "reference", "ratio", "target: result"):
        table.add_column(column, justify="left" if column == "measure" else "right",
                         no_wrap=True)

    def judged(target: str, ok: bool) -> str:
        return f"{target}: {verdict(ok)}"

    for n in SELECT_TARGETS:
        sel, hop = selects[(name, n)]
        ratio, target = sel.p50 / hop.p50, SELECT_TARGETS[n]
        table.add_row(f"select p50, {n} agents", f"{sel.p50:.1f} us", f"{hop.p50:.1f} us hop",
                      f"{ratio:.2f}x", judged(f"<= {target}x", ratio <= target))
        table.add_row("  p99", f"{sel.p99:.1f} us", f"{hop.p99:.1f} us",
                      f"{sel.p99 / hop.p99:.2f}x", "")
    sel, hop = awaiting
    table.add_row("select p50, 100 x 100", f"{sel.p50:.1f} us", f"{hop.p50:.1f} us hop",
                  f"{sel.p50 / hop.p50:.2f}x", "reported")
    for stage, (rec, raw) in zip(("young", "full"), records, strict=True):
        ratio = rec.p50 / raw.p50
        table.add_row(f"record p50, {stage}", f"{rec.p50:.0f} us", f"{raw.p50:.0f} us raw",
                      f"{ratio:.2f}x", judged(f"<= {RECORD_TARGET}x", ratio <= RECORD_TARGET))
        table.add_row("  p99", f"{rec.p99:.0f} us", f"{raw.p99:.0f} us",
                      f"{rec.p99 / raw.p99:.2f}x", "")
    bulk_n, rate, cpu_rate = bulk
    table.add_row(f"import {bulk_n:,} records", f"{rate:,.0f}/s", f"{cpu_rate:,.0f}/s cpu",
                  "", "reported")
    profiles, open_s, open_cpu_s = opened
    table.add_row(f"open {profiles:,} profiles*", f"{open_s:.2f} s", f"{open_cpu_s:.2f} s cpu",
                  "", judged(f"< {OPEN_TARGET_S:.0f} s", open_s < OPEN_TARGET_S))
    table.caption = f"* holding {executions:,} executions"
    return table


def main() -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    console.print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at start")
    strategies = (DEFAULT_STRATEGY, REFERENCE_STRATEGY)
    with tempfile.TemporaryDirectory(prefix="trustroute-bench-") as tmp:
        workdir = Path(tmp)
        with console.status("select() vs RouterRunnable hop ..."):
            selects = {(name, n): bench_select(name, n)
                       for name in strategies for n in SELECT_TARGETS}
        with console.status("select() with runs awaiting verdicts on 100 task types ..."):
            awaiting = {name: bench_select_awaiting(name) for name in strategies}
        with console.status("record() vs raw SDK write (young, then full windows) ..."):
            records = {name: bench_record(workdir, name) for name in strategies}
        with console.status("bulk import of 20,000 records ..."):
            bulks = {name: bench_bulk(workdir, name) for name in strategies}
        with console.status("building and opening a store with 10,000 profiles ..."):
            url, agents, executions = build_open_store(workdir)
            opens = {name: bench_open(url, agents, name) for name in strategies}

    for name in strategies:
        console.print(strategy_table(name, selects, awaiting[name], records[name],
                                     bulks[name], opens[name], executions))
    console.print("hop: one RouterRunnable.invoke over a RunnableLambda; raw: a raw SDK "
                  "write of the same row, on surrealkv; 100 x 100: 100 agents on 100 task "
                  "types, every pair with a run awaiting its verdict; young / full: "
                  "profiles whose windows still grow / are full; cpu: the same figure "
                  "bound by process CPU time")
    console.print("raw SDK write: " + " ".join(RAW_WRITE.split()))
    console.print(f"{DEFAULT_STRATEGY} is the default strategy (it learns in observe()/reset() "
                  f"per record); {REFERENCE_STRATEGY} is stateless.")

if __name__ == "__main__":
    main()

"""Learning: the default strategy beside ``confidence_weighted`` and random on a real log.

Replays ``../shared/data/alpaca_eval_gpt4/outcomes.csv`` (53 agents x 805 tasks, 5 task
types) through real routers on in-memory stores, 20 shuffled runs per scenario, every
strategy on the same runs (see ``trustroute.router.replay``); success means quality >= 0.5.
Targets for the default strategy (issue "learning"):

- 8 random agents per run: >= 90% of the per-task-type oracle;
- all 53 agents: >= 70%;
- 8 agents, the best regressing to the worst halfway: >= 85% of the oracle that knows
  the regression.

Then ``select()`` p50 with 10 trained agents for the default strategy and for
``confidence_weighted``, each timed in alternating blocks against a LangChain
``RouterRunnable.invoke`` hop (the foundation's reference). Defaults were chosen from
principles and synthetic worlds (docs/learning.md), not fitted to this log.
Run: ``python -m benchmarks learning``.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.router import RouterRunnable
from rich.console import Console
from rich.table import Table

from benchmarks.foundation import Latency, paired
from trustroute.profiles import ExecutionRecord
from trustroute.router import AgentRouter
from trustroute.router.replay import ReplayReport, load_outcomes, replay
from trustroute.router.strategies import DEFAULT_STRATEGY

console = Console()

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alpaca_eval_gpt4" / \
    "outcomes.csv"
RUNS = 20
STRATEGIES = (DEFAULT_STRATEGY, "confidence_weighted", "random")
SCENARIOS: tuple[tuple[str, int | None, bool, float], ...] = (  # label, agents, drift, target
    ("8 random agents", 8, False, 90.0),
    ("all 53 agents", None, False, 70.0),
    ("8 agents, drift", 8, True, 85.0),
)


def scenario_table(label: str, report: ReplayReport, target: float) -> Table:
    """One scenario, strategies side by side."""
    summaries = list(report.summaries.values())
    drift = report.settings["drift"]
    oracle = "regression-aware oracle" if drift else "per-task-type oracle"
    table = Table(title=f"{label}: {RUNS} runs, {oracle} mean quality "
                        f"{summaries[0].oracle_quality:.3f}",
                  caption="% of oracle: mean ± 95% CI over runs; regret: final cumulative "
                          "pseudo-regret; oracle's pick: share of decisions on the "
                          "oracle's agent")
    for column in ("strategy", "quality", "% of oracle", "regret", "oracle's pick",
                   "target", "result"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for summary in summaries:
        pct = summary.pct_oracle
        is_default = summary.strategy == DEFAULT_STRATEGY
        ok = pct["mean"] >= target
        table.add_row(summary.strategy, f"{summary.mean_quality['mean']:.3f}",
                      f"{pct['mean']:.1f} ± {pct['ci95']:.1f}",
                      f"{summary.final_regret['mean']:.1f}",
                      f"{summary.oracle_share['mean']:.0%}",
                      f">= {target:.0f}%" if is_default else "",
                      ("[green]PASS[/green]" if ok else "[red]MISS[/red]") if is_default
                      else "")
    return table


def trained_router(strategy: str) -> AgentRouter:
    """10 agents with 3..39 executions each of one task type, on an in-memory store."""
    agents = [f"agent-{i}" for i in range(10)]
    router = AgentRouter(agents=agents, store="mem://", seed=0, strategy=strategy)
    rng = random.Random(1)
    router.record_many([ExecutionRecord(agent_id=a, task_type="code",
                                        success=rng.random() < 0.8, quality=rng.random())
                        for i, a in enumerate(agents) for _ in range(3 + 4 * i)])
    return router


def bench_select(strategy: str) -> tuple[Latency, Latency]:
    """select() p50/p99 for ``strategy`` and for a RouterRunnable hop, interleaved."""
    with trained_router(strategy) as router:
        hop = RouterRunnable(runnables={"code": RunnableLambda(lambda x: x)})
        payload = {"key": "code", "input": "task"}
        return paired(lambda: router.select("code"), lambda: hop.invoke(payload),
                      blocks=10, per_block=1000, warmup=2000)


def bench_select_loop(strategy: str, blocks: int = 10, per_block: int = 200
                      ) -> tuple[Latency, Latency, Latency]:
    """select() inside a select -> record loop (10 agents), with two references.

    Every iteration times one ``select()`` right after a ``record()``, then one hop right
    after another ``record()`` (the same position in the loop: a store write just ran,
    so caches are cold for both), and each block ends with the same number of hops
    timed back to back (the hot hop of the table above). Returns (select in the loop,
    hop in the loop, hot hop).
    """
    with trained_router(strategy) as router:
        hop = RouterRunnable(runnables={"code": RunnableLambda(lambda x: x)})
        payload = {"key": "code", "input": "task"}
        rng = random.Random(2)
        clock = time.perf_counter_ns
        samples: tuple[list[int], list[int], list[int]] = ([], [], [])
        for block in range(blocks + 1):  # block 0 warms up
            for _ in range(per_block):
                start = clock()
                decision = router.select("code")
                took = clock() - start
                router.record(decision, success=True, quality=rng.random())
                start = clock()
                hop.invoke(payload)
                hop_took = clock() - start
                router.record(agent_id=decision.agent_id, task_type="code", success=True,
                              quality=rng.random())
                if block:
                    samples[0].append(took)
                    samples[1].append(hop_took)
            for _ in range(per_block):
                start = clock()
                hop.invoke(payload)
                if block:
                    samples[2].append(clock() - start)
        return Latency.of(samples[0]), Latency.of(samples[1]), Latency.of(samples[2])


def main() -> None:
    if not DATA.exists():
        console.print(f"[yellow]skipped:[/yellow] {DATA} not found")
        return
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    jobs = max(1, min(2, os.cpu_count() or 1))
    console.print(f"machine: {os.cpu_count()} cores, load average {load:.1f}; "
                  f"{jobs} worker process(es)")
    log = load_outcomes(DATA)
    for label, agents, drift, target in SCENARIOS:
        with console.status(f"replaying: {label} ..."):
            report = replay(log, list(STRATEGIES), runs=RUNS, seed=0, agents=agents,
                            drift=drift, jobs=jobs)
        console.print(scenario_table(label, report, target))
    table = Table(title="select() with 10 trained agents vs a RouterRunnable hop (same run)")
    for column in ("strategy", "select p50", "select p99", "hop p50", "ratio"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    with console.status("timing select() ..."):
        for strategy in (DEFAULT_STRATEGY, "confidence_weighted"):
            sel, hop = bench_select(strategy)
            table.add_row(strategy, f"{sel.p50:.1f} us", f"{sel.p99:.1f} us",
                          f"{hop.p50:.1f} us", f"{sel.p50 / hop.p50:.2f}x")
    console.print(table)
    table = Table(title="select() in a select -> record loop, 10 agents (target <= 1.5x "
                        "a hop)", caption="hop in loop: timed right after a record(), "
                        "like select(); hot hop: back to back")
    for column in ("strategy", "select p50", "hop in loop", "ratio", "hot hop", "ratio"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    with console.status("timing select() in the loop ..."):
        for strategy in (DEFAULT_STRATEGY, "confidence_weighted"):
            sel, hop_loop, hot = bench_select_loop(strategy)
            table.add_row(strategy, f"{sel.p50:.1f} us", f"{hop_loop.p50:.1f} us",
                          f"{sel.p50 / hop_loop.p50:.2f}x", f"{hot.p50:.1f} us",
                          f"{sel.p50 / hot.p50:.2f}x")
    console.print(table)


if __name__ == "__main__":
    main()

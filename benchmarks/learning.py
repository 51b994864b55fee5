"""Learning: the default strategy beside the previous default and baselines, one run.

Every strategy replays the same runs (``trustroute.router.replay``: real routers on
in-memory stores; success means quality >= 0.5):

- the development log ``../shared/data/alpaca_eval_gpt4/outcomes.csv`` (53 agents x 805
  tasks, 5 task types): 8 random agents, all 53, and 8 agents whose best regresses to
  the worst halfway (% of the oracle that knows the regression). Targets: >= 95, >= 90,
  >= 94 % of the per-task-type oracle;
- synthetic leaderboard worlds (``benchmarks.worlds``: few strong agents, most weak,
  correlated across task types): 57 agents x 160 tasks per type, 80 x 100 and 40 x 300,
  5 task types, several world seeds. Target: >= 85 % of the oracle and ahead of
  Thompson sampling over all agents. Beside them, on the same runs, what a policy that
  knows the population prior could reach (``benchmarks.bounds``);
- regression: in the drift runs, how many tasks of its type pass before the regressed
  agent's traffic halves (target: within 30).

Strategies: ``knowledge_gradient`` (the default), ``thompson`` (the previous default:
Thompson sampling over all agents), ``epsilon_greedy`` (ε = 0.05, pooled like the
default), a discounted Thompson baseline (half-life 50 executions, no change test) and a
change-detector baseline (the GLR change test with Thompson sampling, no discounting),
and ``random``. Then ``select()`` with 10 trained agents against a LangChain
``RouterRunnable.invoke`` hop, in a plain loop and inside a select -> record loop.
Defaults were chosen from principles and synthetic worlds (docs/learning.md), not fitted
to the development log. Run: ``python -m benchmarks learning``.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.router import RouterRunnable
from rich.console import Console
from rich.table import Table

from benchmarks.bounds import BOUNDS, bounds
from benchmarks.foundation import Latency, paired
from benchmarks.worlds import leaderboard_log
from trustroute.profiles import ExecutionRecord
from trustroute.router import AgentRouter
from trustroute.router.replay import (
    OutcomeLog,
    RunResult,
    StrategySpec,
    load_outcomes,
    replay,
    run_metrics,
)
from trustroute.router.strategies import DEFAULT_STRATEGY

console = Console()

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alpaca_eval_gpt4" / \
    "outcomes.csv"
RUNS = 10
LOOP_TARGET = 1.5  # select() in a select -> record loop, against a RouterRunnable hop
STRATEGIES = (
    StrategySpec("knowledge_gradient (default)", "knowledge_gradient"),
    StrategySpec("thompson (previous)", "thompson"),
    StrategySpec("epsilon_greedy 0.05", "epsilon_greedy"),
    StrategySpec("discounted TS", "thompson",
                 {"half_life_executions": 50, "change_detection": False}),
    StrategySpec("change-detector TS", "thompson", {"half_life_executions": None}),
    StrategySpec("random", "random"),
)
DEV_SCENARIOS: tuple[tuple[str, int | None, bool, float], ...] = (  # label, agents, drift, target
    ("8 agents", 8, False, 95.0),
    ("all 53", None, False, 90.0),
    ("8, drift", 8, True, 94.0),
)
WORLDS: tuple[tuple[str, int, int], ...] = (  # label, agents, tasks per task type
    ("57 x 160", 57, 160),
    ("80 x 100", 80, 100),
    ("40 x 300", 40, 300),
)
WORLD_SEEDS, WORLD_RUNS, WORLD_TYPES, WORLD_TARGET = tuple(range(12)), 1, 5, 85.0
HALVING_TARGET = 30


def halving_tasks(result: RunResult, window: int = 10) -> list[int]:
    """Per task type where the regressed agent carried traffic before the regression:
    tasks of that type after it until the agent's share of the last ``window`` of them
    is at most half its share of the ``3 x window`` before it (the stream's end when
    it never is)."""
    plan = result.plan
    if plan.drift_step is None or plan.regressed is None:
        return []
    agent = plan.agents.index(plan.regressed)
    types = np.array(plan.task_types)
    out = []
    for task_type in sorted(set(plan.task_types)):
        steps = np.flatnonzero(types == task_type)
        before = steps[steps < plan.drift_step][-3 * window:]
        after = steps[steps >= plan.drift_step]
        share = float(np.mean(result.chosen[before] == agent)) if len(before) else 0.0
        if share < 0.2 or len(after) < window:
            continue
        hits = (result.chosen[after] == agent).astype(float)
        rolling = np.convolve(hits, np.ones(window), "valid") / window
        below = np.flatnonzero(rolling <= share / 2.0)
        out.append(int(below[0]) + window if below.size else len(after))
    return out


def pct(value: float, target: float | None = None) -> str:
    """A % of oracle cell, red when below ``target``."""
    text = f"{value:.1f}"
    return text if target is None or value >= target else f"[red]{text}[/red]"


def replay_all(log: OutcomeLog, specs: Sequence[StrategySpec], jobs: int, **kwargs: object
               ) -> dict[str, list[RunResult]]:
    """Every strategy on the same runs; results per label."""
    report = replay(log, list(specs), jobs=jobs, **kwargs)  # type: ignore[arg-type]
    return report.results


def oracle_pct(results: list[RunResult]) -> float:
    """Mean % of oracle over runs."""
    return float(np.mean([run_metrics(r).pct_oracle for r in results]))


def dev_log_table(log: OutcomeLog, jobs: int) -> None:
    """The development log's scenarios and the regression figures, one row per strategy."""
    columns: dict[str, dict[str, float]] = {}
    halving: dict[str, list[int]] = {}
    for label, agents, drift, _ in DEV_SCENARIOS:
        with console.status(f"replaying the development log: {label} ..."):
            results = replay_all(log, STRATEGIES, jobs, runs=RUNS, seed=0, agents=agents,
                                 drift=drift)
        for spec in STRATEGIES:
            columns.setdefault(spec.label, {})[label] = oracle_pct(results[spec.label])
            if drift:
                halving[spec.label] = [n for r in results[spec.label] for n in halving_tasks(r)]
    table = Table(title=f"development log: % of per-task-type oracle, {RUNS} runs each",
                  caption=f"halve: median tasks of its type until a regressed agent's "
                          f"traffic halves (share of cases within {HALVING_TARGET}); "
                          "red: below target")
    table.add_column("strategy")
    for label, _, _, target in DEV_SCENARIOS:
        table.add_column(f"{label}\n>= {target:.0f}", justify="right")
    table.add_column(f"halve\n<= {HALVING_TARGET}", justify="right")
    for spec in STRATEGIES:
        default = spec.name == DEFAULT_STRATEGY and not spec.params
        cells = [pct(columns[spec.label][label], target if default else None)
                 for label, _, _, target in DEV_SCENARIOS]
        n = halving[spec.label]
        within = np.mean([x <= HALVING_TARGET for x in n]) if n else float("nan")
        cells.append(f"{np.median(n):.0f} ({within:.0%})" if n else "-")
        table.add_row(spec.label, *cells)
    console.print(table)


def worlds_table(jobs: int) -> None:
    """Synthetic leaderboard worlds, one row per strategy, then what a policy that knows
    the population prior could reach on the same runs (``benchmarks.bounds``)."""
    columns: dict[str, dict[str, list[float]]] = {}
    for label, agents, per_type in WORLDS:
        for seed in WORLD_SEEDS:
            log = leaderboard_log(seed, agents, WORLD_TYPES, per_type)
            with console.status(f"replaying world {label}, seed {seed} ..."):
                results = replay_all(log, STRATEGIES, jobs, runs=WORLD_RUNS, seed=seed)
            for spec in STRATEGIES:
                columns.setdefault(spec.label, {}).setdefault(label, []).append(
                    oracle_pct(results[spec.label]))
            for run in results[STRATEGIES[0].label]:  # every strategy replays these plans
                for name, value in bounds(run.plan).items():
                    columns.setdefault(name, {}).setdefault(label, []).append(value)
    table = Table(title=f"synthetic leaderboard worlds (agents x tasks per type, "
                        f"{WORLD_TYPES} types): % of oracle",
                  caption=f"{len(WORLD_SEEDS)} worlds x {WORLD_RUNS} run"
                          f"{'s' if WORLD_RUNS > 1 else ''} each; target "
                          f">= {WORLD_TARGET:.0f} and ahead of thompson; red: below. "
                          "Below the line, on the same runs: the agent with the best "
                          "overall level (known), and a search that knows the population "
                          "prior and learns each agent exactly from its first task "
                          "(benchmarks/bounds.py)")
    table.add_column("strategy")
    for label, _, _ in WORLDS:
        table.add_column(label, justify="right")
    for spec in STRATEGIES:
        default = spec.name == DEFAULT_STRATEGY and not spec.params
        table.add_row(spec.label, *(pct(float(np.mean(columns[spec.label][label])),
                                        WORLD_TARGET if default else None)
                                    for label, _, _ in WORLDS),
                      end_section=spec is STRATEGIES[-1])
    for name in BOUNDS:
        digits = 0 if name == BOUNDS[-1] else 1  # the last is a count of agents
        table.add_row(f"[dim]{name}[/dim]", *(f"{np.mean(columns[name][label]):.{digits}f}"
                                             for label, _, _ in WORLDS))
    console.print(table)


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
    so caches are cold for both); every record is of a decision, as in an application
    (the select before the second one is not timed). Each block ends with the same
    number of hops timed back to back (the hot hop of the table above). Returns (select
    in the loop, hop in the loop, hot hop).
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
                router.record(router.select("code"), success=True, quality=rng.random())
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
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    jobs = max(1, min(2, os.cpu_count() or 1))
    console.print(f"machine: {os.cpu_count()} cores, load average {load:.1f}; "
                  f"{jobs} worker process(es)")
    if DATA.exists():
        dev_log_table(load_outcomes(DATA), jobs)
    else:
        console.print(f"[yellow]development log skipped:[/yellow] {DATA} not found")
    worlds_table(jobs)
    table = Table(title="select() with 10 trained agents vs a RouterRunnable hop (same run)")
    for column in ("strategy", "select p50", "select p99", "hop p50", "ratio"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    with console.status("timing select() ..."):
        for strategy in (DEFAULT_STRATEGY, "thompson", "confidence_weighted"):
            sel, hop = bench_select(strategy)
            table.add_row(strategy, f"{sel.p50:.1f} us", f"{sel.p99:.1f} us",
                          f"{hop.p50:.1f} us", f"{sel.p50 / hop.p50:.2f}x")
    console.print(table)
    table = Table(title="select() in a select -> record loop, 10 agents (target <= 1.5x "
                        "a hop)", caption="hop in loop: timed right after a record(), "
                        "like select(); hot hop: back to back")
    for column in ("strategy", "select p50", "hop in loop", "ratio", "hot hop", "ratio"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    met: list[str] = []
    with console.status("timing select() in the loop ..."):
        for strategy in (DEFAULT_STRATEGY, "thompson", "confidence_weighted"):
            sel, hop_loop, hot = bench_select_loop(strategy)
            table.add_row(strategy, f"{sel.p50:.1f} us", f"{hop_loop.p50:.1f} us",
                          f"{sel.p50 / hop_loop.p50:.2f}x", f"{hot.p50:.1f} us",
                          f"{sel.p50 / hot.p50:.2f}x")
            if strategy == DEFAULT_STRATEGY:
                met = [name for name, hop in (("the hop in the loop", hop_loop),
                                              ("the hot hop", hot))
                       if sel.p50 <= LOOP_TARGET * hop.p50]
    console.print(table)
    console.print(f"{DEFAULT_STRATEGY}: <= {LOOP_TARGET}x met against "
                  f"{' and '.join(met) if met else 'neither reference'}")


if __name__ == "__main__":
    main()

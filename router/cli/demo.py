"""``trustroute demo``: watch the router learn which agent is best at what.

A simulated workload (agents with hidden skill per task type) is routed task by task
with ``select`` and ``record`` on the real store, then judged against the best single
agent, random choice and the oracle that knows the hidden skills.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from trustroute.router.cli.base import (
    cli,
    console,
    err_console,
    json_option,
    load_router_config,
    open_router,
    print_json,
    router_options,
    strategy_option,
    strategy_overrides,
)
from trustroute.router.cli.tables import (
    LEADERBOARD_LEGEND,
    fitted,
    leaderboard_heading,
    leaderboard_table,
    pct,
    plural,
)
from trustroute.router.cli.text import shown
from trustroute.router.demo import DEFAULT_WORKLOAD, DemoSummary, TaskResult, run_demo, summarize


def _report(summary: DemoSummary, store_url: str, store_given: bool) -> None:
    s = summary
    for task_type, rows in s.leaderboard.items():
        console.print(leaderboard_heading(task_type, rows, s.preferred.get(task_type)))
        console.print(fitted(leaderboard_table(rows), console))
    console.print(LEADERBOARD_LEGEND, style="dim")
    console.print(
        f"[bold]routed mean quality {s.routed_expected_quality:.3f}[/] (observed "
        f"{s.routed_quality:.3f}) vs best single agent {shown(s.best_single_agent)} "
        f"{s.best_single_quality:.3f} and random {s.random_quality:.3f}; oracle "
        f"{s.oracle_quality:.3f} ({pct(s.share_of_oracle)} of oracle)")
    curve = " → ".join(f"{q:.2f}" for q in s.learning_curve)
    console.print(f"learning curve (mean quality per quarter of the run): {curve}; the "
                  f"hidden best agent got {pct(s.best_pick_rate)} of the tasks")
    if store_url != "mem://":
        hint = f" --store {store_url}" if store_given else ""
        console.print(f"profiles are stored in {shown(store_url)}; see them with:")
        console.print(f"  trustroute profiles{shown(hint)}", soft_wrap=True)  # one line


@cli.command()
@click.option("--tasks", "-n", type=click.IntRange(1, 1_000_000), default=400,
              show_default=True, help="Number of simulated tasks.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the task stream, the outcomes and the router's randomness.")
@strategy_option
@router_options
@json_option
def demo(tasks: int, seed: int, strategy: str | None, config: Path | None, store: str | None,
         as_json: bool) -> None:
    """Route a simulated workload and show what the router learned.

    Five agents with hidden skill per task type (code, math, writing, support) get
    TASKS tasks; each is routed with select() and its simulated outcome recorded with
    record() in the store (./.trustroute/db unless the config or --store says
    otherwise), so learning carries over between runs. Ends with a leaderboard per task
    type and the routed mean quality next to the best single agent, random choice and
    the oracle. Use --store mem:// for a fresh, throw-away run.
    """
    workload = DEFAULT_WORKLOAD
    overrides: dict[str, Any] = {"agents": workload.agent_specs(), "seed": seed,
                                 **strategy_overrides(strategy)}
    settings = load_router_config(config, store).without_handoffs()  # simulated tasks
    with open_router(config, store, settings, transfer=None, throwaway=True,
                     **overrides) as router:
        url = router.store.url
        if not as_json:
            console.print(f"[bold]trustroute demo[/]: {plural(tasks, 'simulated task')} over "
                          f"{plural(len(workload.task_types), 'task type')}, "
                          f"{plural(len(workload.agents), 'agent')} with hidden skill; "
                          f"strategy {router.strategy.name}, store {shown(url)}, seed {seed}")
        with Progress(TextColumn("routing"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("mean quality {task.fields[quality]:.3f}"),
                      TimeElapsedColumn(), console=err_console, disable=as_json) as progress:
            bar = progress.add_task("demo", total=tasks, quality=0.0)
            total = 0.0

            def advance(result: TaskResult) -> None:
                nonlocal total
                total += result.quality
                progress.update(bar, advance=1, quality=total / (result.index + 1))

            run = run_demo(router, workload, tasks=tasks, seed=seed, on_result=advance)
    summary = summarize(run)
    if as_json:
        print_json({"store": url, **summary.as_dict()})
        return
    if summary.executions_before:
        console.print(f"(the store already held {plural(summary.executions_before, 'execution')}"
                      "; this run continued learning from them)")
    _report(summary, url, store is not None)

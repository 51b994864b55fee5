"""``trustroute replay FILE``: compare routing strategies offline on an outcome log."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import click
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    err_console,
    json_option,
    no_folder,
    print_json,
)
from trustroute.router.cli.tables import compact_table, fitted, plural
from trustroute.router.cli.text import shown
from trustroute.router.replay import ReplayReport, load_outcomes, replay, total_steps
from trustroute.router.row_files import TooLong
from trustroute.router.strategies import (
    DEFAULT_STRATEGY,
    PREVIOUS_DEFAULT_STRATEGY,
    available_strategies,
)

DEFAULT_COMPARISON = f"{DEFAULT_STRATEGY},{PREVIOUS_DEFAULT_STRATEGY},confidence_weighted,random"


def parse_params(items: tuple[str, ...], strategies: list[str]) -> dict[str, dict[str, Any]]:
    """``STRATEGY.KEY=VALUE`` (or ``KEY=VALUE`` for every strategy) into params dicts."""
    params: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise CliError(f"--param {item!r}: expected STRATEGY.KEY=VALUE or KEY=VALUE")
        try:
            value = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as exc:  # '[' or '*a': not a value; say so in one line
            problem = getattr(exc, "problem", None) or "not valid YAML"
            raise CliError(f"--param {item!r}: VALUE is not a YAML value ({problem})"
                           ) from None
        except ValueError:  # a whole number past sys.get_int_max_str_digits()
            given = f"{key}={raw[:20]}..."
            problem = TooLong(sum(char.isdigit() for char in raw)).problem()
            raise CliError(f"--param {given!r}: VALUE is {problem}") from None
        name, dot, field = key.rpartition(".")
        targets = [name] if dot else strategies
        for target in targets:
            if target not in strategies:
                raise CliError(f"--param {item!r}: {target!r} is not among the replayed "
                               f"strategies ({', '.join(strategies)})")
            params.setdefault(target, {})[field] = value
    return params


@cli.command(name="replay")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--strategy", "-S", "strategies", default=DEFAULT_COMPARISON,
              help="Comma-separated strategies to compare side by side "
                   f"({', '.join(available_strategies())}).  [default: "
                   f"{DEFAULT_COMPARISON.replace(',', ', ')}]")  # wraps between names
@click.option("--runs", "-n", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="Shuffled orderings of the tasks (each strategy replays the same ones).")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the orderings, agent samples and routers.")
@click.option("--agents", "-k", type=click.IntRange(1), default=None,
              help="Sample K agents per run (default: every agent in the log).")
@click.option("--drift", is_flag=True,
              help="Halfway through each run the best agent behaves like the worst; the "
                   "oracle knows about the regression.")
@click.option("--feedback-rate", type=click.FloatRange(0.0, 1.0), default=1.0,
              show_default=True,
              help="Share of outcomes judged; the rest are recorded, never judged.")
@click.option("--feedback-delay", type=click.IntRange(0), default=0, show_default=True,
              help="Tasks after its decision that a judged outcome's verdict comes.")
@click.option("--param", "-p", "params", multiple=True, metavar="[STRATEGY.]KEY=VALUE",
              help="Strategy parameter, e.g. thompson.half_life_executions=50 (repeatable).")
@click.option("--success-threshold", type=click.FloatRange(0.0, 1.0), default=0.5,
              show_default=True, help="Quality at or above which an outcome is a success.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes (runs are independent).")
@click.option("--plot", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write regret curves to this PNG (needs matplotlib: trustroute[plot]).")
@json_option
def replay_command(file: Path, strategies: str, runs: int, seed: int, agents: int | None,
                   drift: bool, feedback_rate: float, feedback_delay: int,
                   params: tuple[str, ...], success_threshold: float,
                   jobs: int, plot: Path | None, as_json: bool) -> None:
    """Replay the outcome log FILE through real routers and compare strategies.

    FILE is CSV or JSONL with columns agent, task_type, task, quality (0-1) and
    optionally cost and latency_ms, ideally one row for every agent on every task. In
    each run the tasks arrive in a shuffled order; the router (in-memory store) picks
    an agent for each, and only that agent's outcome is revealed and recorded (success
    when quality >= the success threshold). With --feedback-rate/--feedback-delay
    every execution is recorded when it is decided, awaiting a verdict, and only that
    share is judged, each verdict reaching the router that many tasks later through
    router.feedback (like late user verdicts). Reports mean quality, % of the per-task-type
    oracle, cumulative regret and the agents chosen.
    """
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    if plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise CliError("--plot needs matplotlib: pip install 'trustroute[plot]'")
    if plot is not None and not plot.parent.is_dir():  # before the work, not after
        raise CliError(f"--plot {plot}: {no_folder(plot.parent)}")
    if plot is not None and not writable_folder(plot.parent):
        raise CliError(f"--plot {plot}: the folder {plot.parent} cannot be written")
    log = load_outcomes(file)
    strategy_params = parse_params(params, names)
    total = total_steps(log, len(names), runs)
    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=err_console, transient=True,
                  disable=as_json or not err_console.is_terminal) as progress:
        task = progress.add_task("replay", total=total)
        report = replay(log, names, runs=runs, seed=seed, agents=agents, drift=drift,
                        strategy_params=strategy_params, success_threshold=success_threshold,
                        feedback_rate=feedback_rate, feedback_delay=feedback_delay,
                        jobs=jobs, progress=lambda n: progress.advance(task, n))
    if plot is not None:
        from trustroute.router.replay.plot import plot_regret

        plot_regret(report, plot)
    if as_json:
        data = report.as_dict()
        data["settings"]["file"] = str(file)
        if plot is not None:
            data["plot"] = str(plot)
        print_json(data)
        return
    show_report(report, file)
    if plot is not None:
        console.print(f"regret curves written to {shown(str(plot))}")


def show_report(report: ReplayReport, file: Path) -> None:
    """The side-by-side table."""
    s = report.settings
    log = s["log"]
    summaries = list(report.summaries.values())
    oracle = summaries[0].oracle_quality
    console.print(f"{shown(str(file))}: {plural(log['agents'], 'agent')}, "
                  f"{plural(log['tasks'], 'task')}, {plural(log['task_types'], 'task type')}; "
                  f"{plural(s['runs'], 'run')} x {plural(s['agents'], 'agent')} "
                  f"(seed {s['seed']}){', drift' if s['drift'] else ''}"
                  + (f"; {s['feedback_rate']:.0%} judged, {s['feedback_delay']} tasks late"
                     if s["feedback_rate"] < 1.0 or s["feedback_delay"] else ""))
    console.print(f"{'regression-aware ' if s['drift'] else ''}per-task-type oracle: mean "
                  f"quality {oracle:.3f}")
    table = compact_table(("strategy", "mean\nquality", "% of\noracle", "final\nregret",
                           "oracle's\npick", "most chosen agents"),
                          names=("strategy", "most chosen agents"))
    for summary in summaries:
        pct, quality, regret = summary.pct_oracle, summary.mean_quality, summary.final_regret
        top = "\n".join(f"{shown(a)} {share:.0%}" for a, share in summary.choice_share(2))
        share = ("—" if not math.isfinite(pct["mean"])  # the oracle's quality is 0
                 else f"{pct['mean']:.1f}" if pct["ci95"] is None  # one run: no spread
                 else f"{pct['mean']:.1f} ± {pct['ci95']:.1f}")
        table.add_row(shown(summary.strategy), f"{quality['mean']:.3f}", share,
                      f"{regret['mean']:.1f}", f"{summary.oracle_share['mean']:.0%}", top)
    # a strategy's name is the row's key: never folded (narrower, columns are left out)
    table.columns[0].min_width = max(len(shown(s.strategy)) for s in summaries)
    console.print(fitted(table, console))


def writable_folder(folder: Path) -> bool:
    """Whether files can be created in ``folder``."""
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)

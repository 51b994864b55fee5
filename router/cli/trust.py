"""``trustroute review | decay | calibration | trust``: the trust layer from the shell."""

from __future__ import annotations

import math
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import click

from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    exclusive,
    json_option,
    open_reader,
    open_router,
    print_json,
    router_options,
    store_label,
    utc_time,
)
from trustroute.router.cli.tables import compact_table, fitted, num, plural
from trustroute.router.cli.text import shown
from trustroute.router.errors import did_you_mean
from trustroute.router.strategies import available_strategies
from trustroute.router.trust.calibration import CalibrationReport, calibration_report
from trustroute.router.trust.lifecycle import run_decay


@cli.command(name="review")
@click.argument("agent_id", metavar="AGENT")
@click.argument("task_type")
@click.option("--approve", is_flag=True,
              help="The verdict: approval pins the human score at 0.95.")
@click.option("--reject", is_flag=True,
              help="Or: rejection counts one rejection and withdraws an earlier approval.")
@click.option("--comment", "-m", default=None, help="Why (kept with the review).")
@router_options
@json_option
def review(agent_id: str, task_type: str, approve: bool, reject: bool, comment: str | None,
           config: Path | None, store: str | None, as_json: bool) -> None:
    """Record an explicit human review of AGENT on TASK_TYPE."""
    if exclusive(approve=approve, reject=reject) is None:
        raise click.UsageError("say --approve or --reject", ctx=click.get_current_context())
    with open_router(config, store) as router:
        s = router.review(agent_id, task_type, approve, comment)
    if as_json:
        print_json({"agent_id": agent_id, "task_type": task_type, **s.as_dict()})
        return
    console.print(f"{shown(agent_id)} on {shown(task_type)}: frequency {s.frequency:.3f}, "
                  f"effectiveness {s.effectiveness:.3f}, human {s.human:.3f} -> composite "
                  f"{s.composite:.3f} ([bold]{s.tier}[/])")


@cli.command(name="decay")
@click.option("--now", default=None, metavar="ISO-TIME", callback=utc_time,
              help="Run as of this moment (default: now); e.g. 2025-03-01T00:00:00+00:00.")
@click.option("--dry-run", is_flag=True,
              help="Say what this run would do (the same counts) and write nothing.")
@router_options
@json_option
def decay(now: datetime | None, dry_run: bool, config: Path | None, store: str | None,
          as_json: bool) -> None:
    """Weekly trust lifecycle: decay unseen pairs, deprecate weak ones, retire dead ones.

    Safe to schedule daily: it does its work once per ISO week. Retired pairs' executions
    are archived (table execution_archive), not lost.
    """
    with (open_reader if dry_run else open_router)(config, store) as router:
        report = run_decay(router, now=now, dry_run=dry_run)
    if as_json:
        print_json(report.as_dict())
        return
    if report.already_applied:
        console.print(f"decay already applied for {report.week}: nothing "
                      f"{'would change' if dry_run else 'changed'}")
        return
    if dry_run:
        console.print(f"decay {report.week} would do (dry run, nothing written): "
                      f"{report.decayed} decayed, {report.deprecated} deprecated, "
                      f"{report.deleted} deleted ({plural(report.archived_executions, 'execution')}"
                      " archived)")
        return
    console.print(f"decay {report.week}: {report.decayed} decayed, {report.deprecated} "
                  f"deprecated, {report.deleted} deleted "
                  f"({plural(report.archived_executions, 'execution')} archived)")


def print_calibration(report: CalibrationReport, title: str) -> None:
    """Reliability table and the summary figures, as ``trustroute calibration`` shows."""
    table = compact_table(("bucket", "predicted", "realised", "count", "gap"))
    for row in report.table:
        table.add_row(row.label, f"{row.predicted:.3f}", f"{row.realised:.3f}",
                      str(row.count), f"{row.gap:+.3f}")
    console.print(f"[i]{title}[/]")  # above, not as the title: it wraps at the terminal's
    console.print(fitted(table, console))  # width, so a URL is not cut at the table's
    if report.abstained_with_outcome:
        failed = (f"abstained that failed {share(report.abstained_failure_rate)} "
                  f"(vs {share(report.answered_failure_rate)} of the others)")
    else:
        failed = (f"abstained that failed: none with an outcome (others failed "
                  f"{share(report.answered_failure_rate)})")
    console.print(
        f"decisions {report.decisions} ({report.with_outcome} with outcome)  "
        f"Brier {num(report.brier, 4)}  ECE {num(report.ece, 4)}  "
        f"abstention rate {share(report.abstention_rate)}  {failed}")


def share(rate: float) -> str:
    """A rate as a percentage to a decimal; a dash for a share of nothing (NaN)."""
    return "—" if math.isnan(rate) else f"{100 * rate:.1f}%"


@cli.command(name="calibration")
@click.option("--strategy", default=None, metavar="NAME",
              help="Only decisions of this strategy (default: all).")
@click.option("--buckets", default=10, show_default=True, type=click.IntRange(1, 100),
              help="Reliability-table buckets.")
@router_options
@json_option
def calibration(strategy: str | None, buckets: int, config: Path | None, store: str | None,
                as_json: bool) -> None:
    """How honest the router's confidence has been: reliability table, Brier, ECE,
    abstention rate and how often abstained decisions failed."""
    with open_reader(config, store) as router:
        router.flush()
        decisions = router.store.repository(DecisionRepository)
        rows = decisions.confidence_outcomes(strategy)
        logged = decisions.strategy_counts() if strategy and not rows else {}
        url = store_label(router)
    if strategy and not rows and strategy not in available_strategies():
        raise CliError(f"--strategy: no decisions of {strategy!r} in {url}"
                       f"{did_you_mean(strategy, [*logged, *available_strategies()])}; "
                       f"logged: {strategies_line(logged)}")
    report = calibration_report(rows, buckets)
    if as_json:
        print_json(report.as_dict())
        return
    if strategy and not rows:
        console.print(f"no decisions of strategy {shown(repr(strategy))} in {shown(url)}; "
                      f"logged: {shown(strategies_line(logged))}")
        return
    if not report.with_outcome:
        console.print(f"no decisions with recorded outcomes in {shown(url)} yet "
                      f"({report.decisions} logged)")
        return
    print_calibration(report, f"calibration of decision confidence in {shown(url)}")


def strategies_line(logged: dict[str, int]) -> str:
    """``knowledge_gradient (100), thompson (3)``, or ``none`` for an empty log."""
    return ", ".join(f"{name} ({count:,})" for name, count in sorted(logged.items())) or "none"


@cli.command(name="trust")
@click.option("--task-type", "-t", default=None, metavar="T", help="Only this task type.")
@click.option("--agent", "-a", default=None, metavar="ID", help="Only this agent.")
@router_options
@json_option
def trust(task_type: str | None, agent: str | None, config: Path | None, store: str | None,
          as_json: bool) -> None:
    """Composite trust per (agent, task type): the three scores, composite and tier."""
    with open_reader(config, store) as router:
        book = router.trust_layer.book
        counted = book.all_counts()
        rows = [(pair, counts, book.scores(*pair)) for pair, counts in counted.items()
                if (task_type is None or pair[1] == task_type)
                and (agent is None or pair[0] == agent)]
    rows.sort(key=lambda r: (r[0][1], -r[2].composite, r[0][0]))
    if as_json:
        print_json([{"agent_id": a, "task_type": t, **s.as_dict(), **asdict(c)}
                    for (a, t), c, s in rows])
        return
    if not rows and counted:  # the filters match nothing; say which, and what is close
        known = {a for a, t in counted if task_type is None or t == task_type}
        hint = did_you_mean(agent, known - {agent}) if agent is not None else ""
        if task_type is not None and not hint:
            hint = did_you_mean(task_type, {t for _, t in counted})
        wanted = " and ".join(f"{what} {shown(repr(value))}" for what, value in
                              (("agent", agent), ("task type", task_type)) if value is not None)
        console.print(f"no trust data of {wanted}{shown(hint)}")
        return
    if not rows:
        console.print("no trust data yet: record outcomes or reviews first")
        return
    # most telling first: a narrow terminal leaves out the rightmost (tables.fitted)
    table = compact_table(("task type", "agent", "composite", "tier", "freq", "effect",
                           "human", "obs", "contra"), title="trust per (agent, task type)")
    for (a, t), c, s in rows:
        table.add_row(shown(t), shown(a), f"{s.composite:.3f}", str(s.tier),
                      f"{s.frequency:.2f}", f"{s.effectiveness:.2f}", f"{s.human:.2f}",
                      str(c.observations), str(c.contradictions))
    console.print(fitted(table, console))


"""``trustroute report``: one self-contained HTML page of what the router learned."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    err_console,
    open_router,
    router_options,
)
from trustroute.router.report import PLOT_HINT, write_report
from trustroute.router.report.html import load_charts


def parse_since(text: str | None) -> datetime | None:
    """--since as an aware UTC datetime (a date means its midnight, UTC)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--since: {text!r} is not an ISO date (e.g. 2025-03-01 or "
                       "2025-03-01T12:00:00+00:00)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise CliError(f"--since: {text!r} is out of range in UTC") from None


@cli.command(name="report")
@click.option("--out", "-o", "out", default=Path("report.html"), show_default=True,
              type=click.Path(path_type=Path, dir_okay=False), help="The HTML file to write.")
@click.option("--task-type", "-t", default=None, metavar="T", help="Only this task type.")
@click.option("--since", "since_text", default=None, metavar="DATE",
              help="Draw the charts over time from this ISO date/time on (UTC unless given).")
@router_options
def report(out: Path, task_type: str | None, since_text: str | None, config: Path | None,
           store: str | None) -> None:
    """Write one self-contained HTML report: leaderboards, routing over time, trust
    radar and trend, calibration of the router's confidence, hand-offs.

    No server, no network: the pictures are inline (they need matplotlib,
    pip install "trustroute[plot]"; without it the report has the tables).
    """
    since = parse_since(since_text)
    with open_router(config, store) as router:
        total = router.store.executions.count()
        with Progress(TextColumn("reading executions"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err_console, transient=True) as progress:
            bar = progress.add_task("report", total=total)
            path = write_report(router, out, task_type=task_type, since=since,
                                progress=lambda n: progress.advance(bar, n))
    console.print(f"report written to {escape(str(path))}", highlight=False, soft_wrap=True)
    if load_charts() is None:
        console.print(f"tables only, no matplotlib: {escape(PLOT_HINT)}", highlight=False)

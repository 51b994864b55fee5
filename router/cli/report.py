"""``trustroute report``: one self-contained HTML page of what the router learned."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    err_console,
    json_option,
    no_folder,
    open_reader,
    print_json,
    router_options,
    store_label,
    utc_time,
)
from trustroute.router.cli.text import shown
from trustroute.router.report import PLOT_HINT, write_report
from trustroute.router.report.html import load_charts


@cli.command(name="report")
@click.option("--out", "-o", "out", default=Path("report.html"), show_default=True,
              type=click.Path(path_type=Path, dir_okay=False), help="The HTML file to write.")
@click.option("--task-type", "-t", default=None, metavar="T", help="Only this task type.")
@click.option("--since", default=None, metavar="DATE", callback=utc_time,
              help="Draw the charts over time from this ISO date/time on (UTC unless given).")
@router_options
@json_option
def report(out: Path, task_type: str | None, since: datetime | None, config: Path | None,
           store: str | None, as_json: bool) -> None:
    """Write one self-contained HTML report: leaderboards, routing over time, trust
    radar and trend, calibration of the router's confidence, hand-offs.

    No server, no network: the pictures are inline (they need matplotlib,
    pip install "trustroute[plot]"; without it the report has the tables).
    """
    if not out.parent.is_dir():  # a typo in the folder must not leave a stray tree
        raise CliError(f"--out {out}: {no_folder(out.parent)}")
    with open_reader(config, store) as router:
        total = router.store.executions.count()
        source = store_label(router)
        with Progress(TextColumn("reading executions"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err_console, transient=True,
                      disable=as_json or not err_console.is_terminal) as progress:
            bar = progress.add_task("report", total=total)
            path = write_report(router, out, task_type=task_type, since=since,
                                source=source, progress=lambda n: progress.advance(bar, n))
    pictures = load_charts() is not None
    if as_json:
        print_json({"path": str(path.resolve()), "store": source, "executions": total,
                    "task_type": task_type, "since": since, "pictures": pictures})
        return
    console.print(f"report written to {shown(str(path))}", soft_wrap=True)
    if not pictures:
        console.print(f"tables only, no matplotlib: {shown(PLOT_HINT)}")

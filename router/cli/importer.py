"""``trustroute import FILE``: bulk-load an execution log (JSONL or CSV) into the store."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from trustroute.profiles.records import ExecutionRecord
from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    err_console,
    json_option,
    load_router_config,
    open_router,
    print_json,
    router_options,
)
from trustroute.router.cli.execution_file import iter_executions
from trustroute.router.cli.tables import plural
from trustroute.router.cli.text import shown
from trustroute.router.config.model import RouterConfig
from trustroute.router.errors import UnknownAgent


@cli.command(name="import")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default=None,
              help="File format; default from the extension (.jsonl/.ndjson or .csv).")
@click.option("--batch-size", type=click.IntRange(1, 100_000), default=1000,
              show_default=True, help="Records written per transaction.")
@router_options
@json_option
def import_executions(file: Path, fmt: str | None, batch_size: int, config: Path | None,
                      store: str | None, as_json: bool) -> None:
    """Import executions from FILE (JSONL or CSV) and update every profile.

    Columns: agent_id (or agent), task_type, success, and optionally quality,
    latency_ms, cost, timestamp (ISO 8601 with a timezone, or POSIX seconds),
    record_id, decision_id, metadata, run_ids. A timestamp more than profiles.max_clock_skew_s
    ahead of now, or metadata over profiles.max_metadata_bytes, is a bad row. The file is
    streamed twice, so memory stays flat
    however long it is: the first pass checks every row, and a bad row stops the import
    before anything is written, naming its line and field; the second writes in batches.
    Rows already in the store (same record_id) are skipped, so importing twice is safe.
    FILE must be a regular file (not a pipe such as /dev/stdin).
    """
    if not file.is_file():  # a pipe (/dev/stdin, <(...)) is empty by the second pass
        raise CliError(f"{file} is not a regular file (a pipe?): import reads its file "
                       "twice; save it to a file first (zcat log.gz > log.jsonl)")
    # pass 1 checks every row: a bad one stops the import here, before anything is written
    cfg = load_router_config(config, store)
    rows = sum(1 for _ in iter_executions(file, fmt, check=_checker(cfg)))
    with open_router(config, store, cfg) as router:  # a store held elsewhere: says so
        imported = 0
        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err_console,
                      disable=as_json or not rows) as progress:
            task = progress.add_task("import", total=rows)
            records = iter_executions(file, fmt)  # pass 2: streamed, one batch at a time
            while chunk := list(islice(records, batch_size)):
                imported += router.record_many(chunk, batch_size=batch_size)
                progress.advance(task, len(chunk))
        url = router.store.url
    skipped = rows - imported
    if as_json:
        print_json({"file": str(file), "store": url, "rows": rows,
                    "imported": imported, "duplicates_skipped": skipped})
        return
    console.print(f"imported {plural(imported, 'execution')} from {shown(str(file))} into "
                  f"{shown(url)}; skipped {plural(skipped, 'duplicate')}")


def _checker(cfg: RouterConfig) -> Callable[[ExecutionRecord], None]:
    """Pass 1's check of one record: everything the write would refuse (the settings'
    limits, and an unlisted agent under ``unknown_agents: error``), as ValueError."""
    known = [spec.id for spec in cfg.agents]
    refuse = bool(known) and cfg.unknown_agents == "error"

    def check(record: ExecutionRecord) -> None:
        cfg.profiles.admit(record)
        if refuse and record.agent_id not in known:
            raise ValueError(f"agent_id: {UnknownAgent(record.agent_id, known)} "
                             "(unknown_agents: error)")
    return check

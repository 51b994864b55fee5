"""``trustroute import-handoffs FILE``: hand-offs, their decision log and saved
calibrations, as ``trustroute export --handoffs`` wrote them, into this store."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import click

from trustroute.profiles.store.handoff_archive import HandoffArchive
from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    json_option,
    open_router,
    print_json,
    router_options,
)
from trustroute.router.cli.tables import plural
from trustroute.router.cli.text import shown
from trustroute.router.handoff.archive import (
    CalibrationRow,
    DecisionRow,
    TransferRow,
    read_archive,
    stored,
)
from trustroute.router.row_files import RowFileError

_BATCH = 1000  # rows per transaction


@cli.command(name="import-handoffs")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@router_options
@json_option
def import_handoffs(file: Path, config: Path | None, store: str | None,
                    as_json: bool) -> None:
    """Import hand-offs from FILE, as `trustroute export --handoffs` wrote it.

    Transfers (a pending one is delivered by this store's workers from then on), the
    answer-or-transfer decision log and saved calibrations. The whole file is checked
    first; a bad row stops the import before anything is written, naming its line.
    Importing twice is safe: a transfer stored here only moves forward (pending,
    delivered, resolved), a decision is stored once, a calibration is replaced only by
    a newer one. FILE must be a regular file (not a pipe).
    """
    if not file.is_file():  # a pipe is empty by the second pass
        raise CliError(f"{file} is not a regular file (a pipe?): import-handoffs reads "
                       "its file twice; save it to a file first")
    try:
        rows = sum(1 for _ in read_archive(file))  # pass 1: every row checked
    except RowFileError as exc:
        raise CliError(str(exc)) from None
    with open_router(config, store) as router:
        archive = router.store.repository(HandoffArchive)
        counts = _write(archive, read_archive(file))  # pass 2: streamed, in batches
        url = router.store.url
    if as_json:
        print_json({"file": str(file), "store": url, "rows": rows, **counts})
        return
    console.print(
        f"imported {plural(counts['handoffs'], 'hand-off row')} "
        f"({counts['moved_forward']} moved forward), "
        f"{plural(counts['handoff_decisions'], 'hand-off decision')}, "
        f"{plural(counts['calibrations'], 'calibration')} from {shown(str(file))} into "
        f"{shown(url)}; {rows - sum(counts.values())} already there")


def _write(archive: HandoffArchive,
           rows: Iterator[TransferRow | DecisionRow | CalibrationRow]) -> dict[str, int]:
    counts = dict.fromkeys(("handoffs", "moved_forward", "handoff_decisions",
                            "calibrations"), 0)
    while chunk := list(islice(rows, _BATCH)):
        of: dict[type, list[dict[str, Any]]] = {TransferRow: [], DecisionRow: [],
                                                CalibrationRow: []}
        for row in chunk:
            of[type(row)].append(stored(row))
        counts["calibrations"] += archive.put_calibrations(of[CalibrationRow])
        counts["handoff_decisions"] += archive.put_decisions(of[DecisionRow])
        created, moved = archive.put_transfers(of[TransferRow])
        counts["handoffs"] += created
        counts["moved_forward"] += moved
    return counts

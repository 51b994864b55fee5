"""``trustroute import-handoffs | import-decisions FILE``: what ``trustroute export``
writes besides the log (``--handoffs``, ``--decisions``), read back into this store.

Both read their file twice: the first pass checks every row, so a bad one stops the
import before anything is written, naming its line and field; the second writes in
batches. Rows already here are not stored twice, so importing twice is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

import click

from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
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
    ArchiveRow,
    CalibrationRow,
    DecisionRow,
    TransferRow,
    read_archive,
    stored,
)
from trustroute.router.row_files import RowFileError
from trustroute.router.trust.decision_file import DecisionFileRow, read_decisions

_BATCH = 1000  # rows per transaction
R = TypeVar("R")


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
    rows, counts, url = _import(file, config, store, read_archive, _put_handoffs)
    if as_json:
        print_json({"file": str(file), "store": url, "rows": rows, **counts})
        return
    console.print(
        f"imported {plural(counts['handoffs'], 'hand-off row')} "
        f"({counts['moved_forward']} moved forward), "
        f"{plural(counts['handoff_decisions'], 'hand-off decision')}, "
        f"{plural(counts['calibrations'], 'calibration')} from {shown(str(file))} into "
        f"{shown(url)}; {rows - sum(counts.values())} already there")


@cli.command(name="import-decisions")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@router_options
@json_option
def import_decisions(file: Path, config: Path | None, store: str | None,
                     as_json: bool) -> None:
    """Import routing decisions from FILE, as `trustroute export --decisions` wrote it.

    The decision log behind `trustroute calibration` and the calibrated confidence of
    new decisions. The whole file is checked first; a bad row stops the import before
    anything is written, naming its line. Importing twice is safe: a decision is stored
    once, and one stored here without an outcome gains the file's. FILE must be a
    regular file (not a pipe).
    """
    rows, counts, url = _import(file, config, store, read_decisions, _put_decisions)
    if as_json:
        print_json({"file": str(file), "store": url, "rows": rows, **counts})
        return
    console.print(f"imported {plural(counts['decisions'], 'decision')} "
                  f"({counts['outcomes_joined']} more with their outcome) from "
                  f"{shown(str(file))} into {shown(url)}; "
                  f"{rows - sum(counts.values())} already there")


def _import(file: Path, config: Path | None, store: str | None,
            read: Callable[[Path], Iterator[R]],
            put: Callable[[Store, list[R]], dict[str, int]]
            ) -> tuple[int, dict[str, int], str]:
    """Check every row of ``file``, then ``put`` them in batches: (rows, what ``put``
    counted, summed, the store's URL)."""
    if not file.is_file():  # a pipe is empty by the second pass
        raise CliError(f"{file} is not a regular file (a pipe?): it is read twice; save "
                       "it to a file first")
    try:
        rows = sum(1 for _ in read(file))  # pass 1: every row checked
    except RowFileError as exc:
        raise CliError(str(exc)) from None
    counts: dict[str, int] = {}
    with open_router(config, store) as router:
        each = read(file)  # pass 2: streamed, in batches
        while chunk := list(islice(each, _BATCH)):
            for name, n in put(router.store, chunk).items():
                counts[name] = counts.get(name, 0) + n
        url = router.store.url
    return rows, counts, url


def _put_handoffs(store: Store, chunk: list[ArchiveRow]) -> dict[str, int]:
    archive = store.repository(HandoffArchive)
    of: dict[type, list[dict[str, Any]]] = {TransferRow: [], DecisionRow: [],
                                            CalibrationRow: []}
    for row in chunk:
        of[type(row)].append(stored(row))
    created, moved = archive.put_transfers(of[TransferRow])
    return {"handoffs": created, "moved_forward": moved,
            "handoff_decisions": archive.put_decisions(of[DecisionRow]),
            "calibrations": archive.put_calibrations(of[CalibrationRow])}


def _put_decisions(store: Store, chunk: list[DecisionFileRow]) -> dict[str, int]:
    new, joined = store.repository(DecisionRepository).put([r.model_dump() for r in chunk])
    return {"decisions": new, "outcomes_joined": joined}

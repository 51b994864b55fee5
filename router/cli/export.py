"""``trustroute export FILE``: the execution log (and the verdicts on it) as files that
``trustroute import`` and ``import-feedback`` read back, into this store or another one:
an embedded store's learning moved to a server, a backup, a copy to study.

Executions are written in log order and keep every field a router learns from (record
and decision ids, run ids, a quality only when one was given: a run awaiting a verdict
stays one); what people said (verdicts, reviews, signals) is written in log order too
and keeps its ids and times, so importing either file twice stores it once. The
lifecycle's marks are not written: they are the weekly job's, which the importing store
runs on its own schedule (docs/trust.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import click

from trustroute.profiles.records import iso_z
from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.handoff_archive import HandoffArchive
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router.cli import base
from trustroute.router.cli.base import CliError, console, no_folder
from trustroute.router.cli.tables import plural
from trustroute.router.cli.text import shown
from trustroute.router.handoff.archive import archive_rows
from trustroute.router.trust.decision_file import decision_rows


def execution_rows(store: Store) -> Iterator[dict[str, Any]]:
    """The stored executions in log order (the order a router folds them in, which an
    import keeps: by timestamp, back-filled history would be placed otherwise), in
    ``trustroute import``'s columns."""
    for logged in store.executions.scan():
        rec = logged.record
        out = rec.model_dump(mode="json", exclude_none=True)  # ISO times, lists
        if not rec.quality_given:  # it awaits (or never got) a verdict: no quality
            out.pop("quality", None)
        for name in ("metadata", "run_ids"):
            if not out.get(name):
                out.pop(name, None)
        yield out


def said_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row of what people said in ``trustroute import-feedback``'s columns: a
    verdict in LangSmith's, a review or signal with its ``kind`` and pair."""
    if row["kind"] == "feedback":
        return verdict_row(row)
    out = {"id": row["id"], "kind": row["kind"], "agent_id": row["agent_id"],
           "task_type": row["task_type"], "created_at": iso_z(row["at"])}
    if row["kind"] == "review":
        out["approved"] = row["approved"]
    else:
        out["signal"] = row["signal"]
    if row.get("comment"):
        out["comment"] = row["comment"]
    return out


def verdict_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored verdict in ``trustroute import-feedback``'s columns (LangSmith's)."""
    ref = ("record_id", row["record_id"]) if row.get("record_id") else \
        ("decision_id", row["decision_id"])
    out = {"id": row["id"], ref[0]: ref[1], "key": row.get("key") or "user",
           "score": row["approved"] if row.get("score") is None else row["score"],
           "created_at": iso_z(row["at"])}
    if ref[0] == "decision_id":  # its decision never got an execution: say whose it is,
        out["agent_id"], out["task_type"] = row["agent_id"], row["task_type"]  # (the log
        # of decisions is not exported), so import-feedback keeps it pending on that pair
    if row.get("comment"):
        out["comment"] = row["comment"]
    return out


def write_jsonl(path: Path, rows: Iterator[dict[str, Any]]) -> int:
    """``rows`` as JSON lines in a new file ``path``; how many."""
    count = 0
    handle: IO[str]
    # written under a temporary name beside it and renamed once complete, so an
    # interrupted export leaves no file that looks like a whole (shorter) export
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with partial.open("x", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
                count += 1
        if path.exists():  # made meanwhile: never written over
            raise CliError(f"{path} exists; export writes a new file (remove it or pick "
                           "another)")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def new_file(path: Path | None) -> None:
    """Refuse a path that exists or whose folder does not (before anything is read)."""
    if path is None:
        return
    if path.exists():
        raise CliError(f"{path} exists; export writes a new file (remove it or pick another)")
    if not path.parent.is_dir():
        raise CliError(f"{path}: {no_folder(path.parent)}")


@base.cli.command(name="export")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--feedback", "feedback_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="Also write what people said (verdicts on executions, reviews, "
                   "signals) to FILE (import-feedback's format).")
@click.option("--handoffs", "handoffs_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="Also write the hand-offs (pending ones too), the hand-off decision "
                   "log and saved calibrations to FILE (import-handoffs' format).")
@click.option("--decisions", "decisions_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, metavar="FILE",
              help="Also write the routing decision log (behind `trustroute calibration`) "
                   "to FILE (import-decisions' format).")
@base.router_options
@base.json_option
def export(file: Path, feedback_file: Path | None, handoffs_file: Path | None,
           decisions_file: Path | None, config: Path | None, store: str | None,
           as_json: bool) -> None:
    """Write the execution log to FILE (JSONL, `trustroute import`'s columns).

    With --feedback, what people said too: verdicts, reviews and signals; with
    --handoffs, the hand-offs, their decision log and saved calibrations; with
    --decisions, the routing decision log. `trustroute import FILE` (and
    `import-feedback`, `import-handoffs`, `import-decisions`) read them back into any
    store, e.g. to move an embedded store's learning to a server; importing twice stores
    each row once. The lifecycle's weekly marks are not exported.
    """
    files = [f for f in (file, feedback_file, handoffs_file, decisions_file)
             if f is not None]
    for each in files:
        new_file(each)
    if len({f.resolve() for f in files}) < len(files):
        raise CliError("FILE, --feedback, --handoffs and --decisions must name different "
                       "files")
    with base.open_reader(config, store, must_exist=True) as router:  # no empty file
        where = base.store_label(router)
        executions = write_jsonl(file, execution_rows(router.store))
        said = router.store.repository(TrustRepository).people()
        handoffs = handoff_kinds(router.store, handoffs_file)
        logged = router.store.repository(DecisionRepository).count()
        if decisions_file is not None:
            write_jsonl(decisions_file, decision_rows(router.store))
    rows = [said_row(r) for r in said]
    if feedback_file is not None:
        write_jsonl(feedback_file, iter(rows))
    kinds = {kind: sum(1 for r in said if r["kind"] == kind)
             for kind in ("feedback", "review", "signal")}
    if as_json:
        base.print_json({"store": where, "file": str(file), "executions": executions,
                         "feedback_file": None if feedback_file is None else str(feedback_file),
                         **({"verdicts": kinds["feedback"], "reviews": kinds["review"],
                             "signals": kinds["signal"]} if feedback_file else
                            {"verdicts": 0, "reviews": 0, "signals": 0}),
                         "not_exported": 0 if feedback_file else len(rows),
                         "handoffs_file": None if handoffs_file is None else str(handoffs_file),
                         **handoffs.as_dict(),
                         "decisions_file": None if decisions_file is None else
                         str(decisions_file),
                         "decisions": logged if decisions_file else 0,
                         "decisions_not_exported": 0 if decisions_file else logged})
        return
    console.print(f"exported {plural(executions, 'execution')} from {shown(where)} to "
                  f"{shown(str(file))}")
    what = ", ".join(plural(kinds[kind], name) for kind, name in
                     (("feedback", "verdict"), ("review", "review"), ("signal", "signal"))
                     if kinds[kind] or kind == "feedback")
    if feedback_file is not None:
        console.print(f"exported {what} to {shown(str(feedback_file))}")
    elif rows:
        console.print(f"{what} not exported (--feedback FILE writes them)")
    if handoffs_file is not None:
        console.print(f"exported {handoffs.said()} to {shown(str(handoffs_file))}")
    elif handoffs.rows:
        console.print(f"{handoffs.said()} not exported (--handoffs FILE writes them)")
    if decisions_file is not None:
        console.print(f"exported {plural(logged, 'routing decision')} to "
                      f"{shown(str(decisions_file))}")
    elif logged:
        console.print(f"{plural(logged, 'routing decision')} not exported (--decisions FILE "
                      "writes them)")


class HandoffKinds(NamedTuple):
    """How many rows of each kind the hand-off state holds (written or not)."""

    transfers: int
    pending: int
    decisions: int
    calibrations: int
    written: bool

    @property
    def rows(self) -> int:
        """All of them."""
        return self.transfers + self.decisions + self.calibrations

    def said(self) -> str:
        """``3 hand-off rows (1 pending), 40 hand-off decisions, 1 calibration``."""
        return (f"{plural(self.transfers, 'hand-off row')} ({self.pending} pending), "
                f"{plural(self.decisions, 'hand-off decision')}, "
                f"{plural(self.calibrations, 'calibration')}")

    def as_dict(self) -> dict[str, int]:
        """The JSON keys (all 0 but ``handoffs_not_exported`` when not written)."""
        counts = {"handoffs": self.transfers, "pending_handoffs": self.pending,
                  "handoff_decisions": self.decisions, "calibrations": self.calibrations}
        if not self.written:
            counts = dict.fromkeys(counts, 0)
        return {**counts, "handoffs_not_exported": 0 if self.written else self.rows}


def handoff_kinds(store: Store, path: Path | None) -> HandoffKinds:
    """The store's hand-off state written to ``path`` (or only counted, without one)."""
    if path is not None:
        write_jsonl(path, archive_rows(store))
    counts = store.repository(HandoffArchive).counts()
    return HandoffKinds(counts["transfers"], counts["pending"], counts["decisions"],
                        counts["calibrations"], path is not None)

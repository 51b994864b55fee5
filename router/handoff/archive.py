"""The hand-off file of ``trustroute export --handoffs`` and ``import-handoffs``: JSON
lines, one per transfer row, decision or saved calibration, told apart by ``kind``.

- ``{"kind": "handoff", "request_id", "hook", "status", "request", "reason",
  "task_type", "error", "attempts", "created_at", "updated_at", "delivered_at",
  "resolved_at"}``: one hook's row of a transfer (``status`` pending, delivered or
  resolved; ``request`` the TransferRequest as it was accepted);
- ``{"kind": "decision", "id", "task_type", "transferred", "confidence",
  "insufficient", "reason", "source", "run_id", "request_id", "created_at"}``: one
  answer-or-transfer decision;
- ``{"kind": "calibration", "name", "settings", "report", "created_at"}``: a saved
  calibration (``confidence="name"``).

Times are ISO 8601 with a zone. Reading checks the whole file first, each problem a
RowFileError naming the line and the field, so a bad file writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, Field, StrictBool, StrictInt, StrictStr, model_validator

from trustroute.profiles.records import iso_z
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoff_archive import HandoffArchive
from trustroute.router.row_files import FileRow, Identifier, RowFileError, model_rows


class TransferRow(FileRow):
    """One hook's row of a transfer."""

    kind: Literal["handoff"]
    request_id: Identifier
    hook: Identifier
    status: Literal["pending", "delivered", "resolved"]
    request: dict[str, Any]
    reason: StrictStr
    task_type: Identifier | None = None
    error: StrictStr | None = None
    attempts: StrictInt = Field(ge=0, le=2**31)
    created_at: AwareDatetime
    updated_at: AwareDatetime
    delivered_at: AwareDatetime | None = None
    resolved_at: AwareDatetime | None = None

    @model_validator(mode="after")
    def _request_is_this_rows(self) -> TransferRow:
        if self.request.get("request_id") != self.request_id:
            raise ValueError(f"request.request_id must be the row's request_id "
                             f"({self.request_id!r})")
        return self


class DecisionRow(FileRow):
    """One answer-or-transfer decision."""

    kind: Literal["decision"]
    id: Identifier
    task_type: Identifier
    transferred: StrictBool
    confidence: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    insufficient: StrictBool
    reason: StrictStr | None = None
    source: StrictStr
    run_id: StrictStr | None = None
    request_id: StrictStr | None = None
    created_at: AwareDatetime


class CalibrationRow(FileRow):
    """A saved calibration."""

    kind: Literal["calibration"]
    name: Identifier
    settings: dict[str, Any]
    report: dict[str, Any] | None = None
    created_at: AwareDatetime


ArchiveRow = TransferRow | DecisionRow | CalibrationRow
_KINDS: dict[str, type[ArchiveRow]] = {"handoff": TransferRow, "decision": DecisionRow,
                                       "calibration": CalibrationRow}


def read_archive(path: Path) -> Iterator[ArchiveRow]:
    """The rows of a hand-off file, checked, streamed; the first problem raises
    RowFileError naming its line."""
    return model_rows(path, lambda line, raw: _kind(path, line, raw))


def _kind(path: Path, line: int, raw: dict[str, Any]) -> type[ArchiveRow]:
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        got = "it is missing" if kind is None else f"got {kind!r}"
        raise RowFileError(path, line, "kind: expected 'handoff', 'decision' or "
                                       f"'calibration', {got}")
    return _KINDS[kind]


def archive_rows(store: Store) -> Iterator[dict[str, Any]]:
    """The store's hand-off state as the file's rows: calibrations, then decisions,
    then transfers (each oldest first)."""
    archive = store.repository(HandoffArchive)
    for cal in archive.calibrations():
        yield {"kind": "calibration", **cal, "created_at": iso_z(cal["created_at"])}
    for decision in archive.decisions():
        yield {"kind": "decision", **_times(decision)}
    for transfer in archive.transfers():
        yield {"kind": "handoff", **_times(transfer)}


def _times(row: dict[str, Any]) -> dict[str, Any]:
    return {k: iso_z(v) if isinstance(v, datetime) else v for k, v in row.items()
            if v is not None}


def stored(row: ArchiveRow) -> dict[str, Any]:
    """A checked row as ``HandoffArchive``'s ``put_*`` take it."""
    return row.model_dump(exclude={"kind"})

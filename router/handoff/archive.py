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
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from trustroute.profiles.records import check_identifier, iso_z
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoff_archive import HandoffArchive
from trustroute.profiles.validation import describe_problem
from trustroute.router.row_files import RowFileError, jsonl_rows

Id = Annotated[StrictStr, AfterValidator(lambda v: check_identifier(v, "it"))]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TransferRow(_Row):
    """One hook's row of a transfer."""

    kind: Literal["handoff"]
    request_id: Id
    hook: Id
    status: Literal["pending", "delivered", "resolved"]
    request: dict[str, Any]
    reason: StrictStr
    task_type: Id | None = None
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


class DecisionRow(_Row):
    """One answer-or-transfer decision."""

    kind: Literal["decision"]
    id: Id
    task_type: Id
    transferred: StrictBool
    confidence: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    insufficient: StrictBool
    reason: StrictStr | None = None
    source: StrictStr
    run_id: StrictStr | None = None
    request_id: StrictStr | None = None
    created_at: AwareDatetime


class CalibrationRow(_Row):
    """A saved calibration."""

    kind: Literal["calibration"]
    name: Id
    settings: dict[str, Any]
    report: dict[str, Any] | None = None
    created_at: AwareDatetime


ArchiveRow = TransferRow | DecisionRow | CalibrationRow
_KINDS: dict[str, type[ArchiveRow]] = {"handoff": TransferRow, "decision": DecisionRow,
                                       "calibration": CalibrationRow}


def read_archive(path: Path) -> Iterator[ArchiveRow]:
    """The rows of a hand-off file, checked, streamed; the first problem raises
    RowFileError naming its line."""
    for line, raw in jsonl_rows(path):
        kind = raw.get("kind")
        if not isinstance(kind, str) or kind not in _KINDS:
            got = "it is missing" if kind is None else f"got {kind!r}"
            raise RowFileError(path, line, "kind: expected 'handoff', 'decision' or "
                                           f"'calibration', {got}")
        try:
            yield _KINDS[kind].model_validate(raw)
        except ValidationError as exc:
            problem = describe_problem(exc.errors()[0], _KINDS[kind]).removeprefix("<root>: ")
            field = problem.partition(":")[0]  # an identifier check's "it" is that field
            raise RowFileError(path, line, problem.replace(": it ", f": {field} ", 1)
                               ) from None


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

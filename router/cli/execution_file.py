"""Reading execution logs (JSONL or CSV) into validated ExecutionRecords.

Files are streamed, one row in memory at a time. The importer validates the whole file
in a first pass before anything is written, so a bad row leaves the store untouched; the
error names the file, the line and the field. Columns: ``agent_id`` (or
``agent``), ``task_type``, ``success`` (required); ``quality``, ``latency_ms``, ``cost``,
``timestamp``, ``record_id``, ``decision_id``, ``metadata``, ``run_ids`` (optional).
Unknown columns are an error, so a misspelt ``qualty`` is not silently dropped.

A row without ``record_id`` gets a stable one derived from its content and from how
many identical rows came before it in the file, so importing the same file twice
imports nothing the second time while genuinely repeated rows still count.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trustroute.profiles.records import MAX_METADATA_DEPTH, ExecutionRecord
from trustroute.profiles.validation import describe_problem, did_you_mean, quoted
from trustroute.router.row_files import (
    RowFileError,
    RowIds,
    blank,
    csv_rows,
    json_value,
    jsonl_rows,
    text_cell,
)

REQUIRED = ("task_type", "success")
OPTIONAL = ("quality", "latency_ms", "cost", "timestamp", "record_id", "decision_id",
            "metadata", "run_ids")
AGENT_COLUMNS = ("agent_id", "agent")
COLUMNS = (*AGENT_COLUMNS, *REQUIRED, *OPTIONAL)
_KNOWN = frozenset(COLUMNS)

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
_TRUE = {"true", "t", "yes", "y", "1", "success", "ok", "pass", "passed"}
_FALSE = {"false", "f", "no", "n", "0", "failure", "fail", "failed", "error"}


class ExecutionFileError(ValueError):
    """A row of an execution log that cannot be imported."""


def _success(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("expected true/false (or 1/0, yes/no, success/failure), got "
                     f"{quoted(value)}")


def _number(value: Any) -> float:
    if not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            return float(str(value).strip())  # exact for ints and floats too
    raise ValueError(f"expected a number, got {quoted(value)}")


def _metadata(value: Any) -> Any:
    try:  # CSV cells hold it as JSON text; ExecutionRecord checks that it is an object
        return json_value(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        raise ValueError("expected a JSON object") from None
    except RecursionError:  # far past what ExecutionRecord accepts
        raise ValueError(f"nested deeper than {MAX_METADATA_DEPTH} levels") from None


def _timestamp(value: Any) -> Any:
    """POSIX seconds (a number, or a number as text) as a UTC datetime; anything else is
    left to ExecutionRecord, which reads ISO 8601 and rejects a time without a timezone.

    Converted here rather than by pydantic, which takes numbers past 2e10 for
    milliseconds: the docs promise seconds.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected an ISO 8601 time or POSIX seconds, got {quoted(value)}")
    try:
        seconds = float(value) if isinstance(value, int | float) else float(str(value).strip())
    except ValueError:
        return value  # not a number: ISO 8601 text
    except OverflowError:  # an integer past any float
        raise ValueError(f"{str(value)[:16]}... POSIX seconds is out of range") from None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        text = str(value)  # a float, or text of a number that fits one
        shown = text if len(text) <= 40 else f"{text[:16]}..."
        raise ValueError(f"{shown} POSIX seconds is out of range") from None


def _run_ids(value: Any) -> Any:
    """LangChain run ids: a list (JSONL), or a JSON array as text (CSV)."""
    try:
        return json_value(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        raise ValueError("expected a JSON array of run ids") from None


# Other columns name something: text.
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "success": _success, "quality": _number, "latency_ms": _number, "cost": _number,
    "metadata": _metadata, "timestamp": _timestamp, "run_ids": _run_ids}


def _check_columns(names: Iterable[str]) -> None:
    for name in names:
        if name == "":  # a header ending in a comma, or two commas in a row
            raise ValueError("the header has a column without a name (a trailing comma?); "
                             f"allowed: {', '.join(COLUMNS)}")
        if name not in _KNOWN:
            raise ValueError(f"{name}: unknown column{did_you_mean(name, COLUMNS)}; allowed: "
                             f"{', '.join(COLUMNS)}")


def row_to_record(row: Mapping[str, Any], ids: RowIds) -> ExecutionRecord:
    """One raw row -> ExecutionRecord; ValueError('field: problem') when it is wrong."""
    _check_columns(row)
    fields: dict[str, Any] = {}
    agent: Any = None
    for name, value in row.items():
        if blank(value):
            continue
        if name in AGENT_COLUMNS:
            value = text_cell(value, name)
            if agent is not None and agent != value:
                raise ValueError("agent_id: agent_id and agent disagree")
            agent = value
            continue
        if name not in _CONVERT:
            fields[name] = text_cell(value, name)
            continue
        try:
            fields[name] = _CONVERT[name](value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    if agent is None:
        raise ValueError("agent_id: missing (give an agent_id or agent column)")
    for name in REQUIRED:
        if name not in fields:
            raise ValueError(f"{name}: missing")
    fields["agent_id"] = str(agent)
    if "record_id" not in fields:
        fields["record_id"] = ids(row)
    try:
        return ExecutionRecord(**fields)
    except ValidationError as exc:
        raise ValueError(describe_problem(exc.errors()[0])) from None


def _check_header(header: Sequence[str]) -> None:
    """A CSV header names only known columns and every required one (empty: no rows)."""
    if not header:
        return
    _check_columns(header)
    missing = [c for c in REQUIRED if c not in header]
    if not any(c in header for c in AGENT_COLUMNS):
        missing.insert(0, "agent_id")
    if missing:
        raise ValueError(f"{missing[0]}: missing column")


def iter_executions(path: Path, fmt: str | None = None, *,
                    check: Callable[[ExecutionRecord], Any] | None = None
                    ) -> Iterator[ExecutionRecord]:
    """Each row of ``path`` as a record, streamed (one row in memory at a time), or
    ExecutionFileError naming the first bad one when the reader reaches it. ``check``
    (e.g. ``ProfileSettings.admit``) refuses a record with a ValueError("field: ...").

    A stream may fail part-way, so the importer makes a first, checking pass through
    the whole file before it writes anything.
    """
    fmt = fmt or FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ExecutionFileError(f"{path}: cannot tell the format from {path.suffix or 'no'!r}"
                                 " extension; use .jsonl or .csv, or pass --format")
    rows = jsonl_rows(path) if fmt == "jsonl" else csv_rows(path, check_header=_check_header)
    ids = RowIds()
    try:
        for line_no, row in rows:
            try:
                record = row_to_record(row, ids)
                if check is not None:
                    check(record)
            except ValueError as exc:
                raise ExecutionFileError(f"{path}: line {line_no}: {exc}") from None
            yield record
    except RowFileError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise ExecutionFileError(f"{exc.path}: {where}{exc.problem}") from None


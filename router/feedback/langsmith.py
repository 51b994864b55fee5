"""Rows of LangSmith's feedback format (JSONL or CSV) as verdicts to give.

A row as LangSmith exports it: ``id`` (the feedback id), ``run_id`` (the ref), ``key``,
``score`` (a number or a bool), ``value``, ``comment``, ``created_at``. ``decision_id``
or ``record_id`` may stand in place of ``run_id``. A bool score (or, without a score, a
bool or number value) is an approval or a rejection, a number a score on the key's
scale. A verdict by ``decision_id`` may carry ``agent_id`` and ``task_type``: the pair
of a decision that never got an execution, as ``trustroute export --feedback`` writes
it. Problems raise RowFileError naming the file, the line and what is wrong.

A row with ``kind`` ``review`` or ``signal`` (what ``trustroute export --feedback``
writes besides verdicts) is a review or a named signal of a pair instead: ``id``,
``agent_id``, ``task_type``, ``approved`` (a review's verdict) or ``signal`` (its name),
``comment``, ``created_at``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustroute.profiles.validation import quoted
from trustroute.router.row_files import (
    Row,
    RowFileError,
    RowIds,
    csv_rows,
    jsonl_rows,
    text_cell,
)

REFS = ("run_id", "decision_id", "record_id")
_TRUE, _FALSE = {"true", "yes"}, {"false", "no"}


@dataclass(frozen=True, slots=True)
class FeedbackRow:
    """One verdict read from a file, with the line it came from."""

    line: int
    feedback_id: str | None
    ref: str
    key: str
    approved: bool | None
    score: float | None
    comment: str | None
    at: datetime | None
    #: (agent_id, task_type) a verdict by ``decision_id`` carries when its decision never
    #: got an execution (``export --feedback`` writes it): kept pending on that pair
    #: where the decision is not logged.
    pair: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class PairRow:
    """One review or signal of a pair read from a file, with the line it came from."""

    line: int
    feedback_id: str | None
    kind: str
    agent_id: str
    task_type: str
    approved: bool | None
    signal: str | None
    comment: str | None
    at: datetime | None


def read_rows(path: Path) -> Iterator[FeedbackRow | PairRow]:
    """The verdicts (reviews, signals) of a JSONL (``.jsonl``/``.ndjson``/``.json``) or
    CSV file; a row without an ``id`` gets one derived from its content (``RowIds``), so
    importing the file twice stores it once."""
    rows: Iterator[Row] = csv_rows(path) if path.suffix.lower() == ".csv" else jsonl_rows(path)
    ids = RowIds()
    for line, row in rows:
        try:
            parsed = parse(line, row)
            yield parsed if parsed.feedback_id else replace(parsed, feedback_id=ids(row))
        except ValueError as exc:
            raise RowFileError(path, line, str(exc)) from None


def parse(line: int, row: dict[str, Any]) -> FeedbackRow | PairRow:
    """One row as a verdict (or a review or signal); ValueError says what is wrong."""
    kind = (_text(row, "kind") or "feedback").strip()
    if kind in ("review", "signal"):
        return _pair_row(line, kind, row)
    if kind != "feedback":
        raise ValueError(f"kind must be feedback, review or signal, got {kind!r}")
    refs = [name for name in REFS if _text(row, name)]
    if not refs:
        raise ValueError("needs run_id (or decision_id or record_id)")
    approved, score = _verdict(row.get("score"), row.get("value"))
    agent, task_type = _text(row, "agent_id"), _text(row, "task_type")
    pair = (agent, task_type) if refs[0] == "decision_id" and agent and task_type else None
    return FeedbackRow(line, _text(row, "id"), _text(row, refs[0]) or "",
                       _text(row, "key") or "user", approved, score,
                       _text(row, "comment"), _moment(_text(row, "created_at")), pair)


def _pair_row(line: int, kind: str, row: dict[str, Any]) -> PairRow:
    """A review (``approved``: true/false) or signal (``signal``: its name) row."""
    names = ("agent_id", "task_type", "approved" if kind == "review" else "signal")
    if missing := [name for name in names
                   if row.get(name) is None or str(row[name]).strip() == ""]:
        raise ValueError(f"a {kind} row needs {' and '.join(missing)}")
    approved = _scalar(row["approved"]) if kind == "review" else None
    if kind == "review" and not isinstance(approved, bool):
        raise ValueError(f"approved must be true or false, got {quoted(row['approved'])}")
    return PairRow(line, _text(row, "id"), kind, _text(row, "agent_id") or "",
                   _text(row, "task_type") or "", approved, _text(row, "signal"),
                   _text(row, "comment"), _moment(_text(row, "created_at")))


def _text(row: dict[str, Any], name: str) -> str | None:
    """The text under ``name`` as it is written (ids and comments are kept verbatim, and
    an id with white space around it is refused where it is checked), or None when it is
    missing or blank (CSV gives '' for a missing one)."""
    value = row.get(name)
    if value is None:
        return None
    text = text_cell(value, name)
    return None if not text.strip() else text


def _verdict(score: Any, value: Any) -> tuple[bool | None, float | None]:
    """(approved, score) from ``score``, else from ``value``."""
    for name, given in (("score", score), ("value", value)):
        parsed = _scalar(given)
        if isinstance(parsed, bool):
            return parsed, None
        if isinstance(parsed, int | float):
            return None, _float(parsed)
        if parsed is not None and name == "score":
            raise ValueError(f"score must be a number or true/false, got {quoted(given)}")
    raise ValueError("needs a score (a number or true/false) or a boolean or numeric value")


def _scalar(value: Any) -> Any:
    """A bool, a number, None, or the value itself (CSV text is parsed)."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    if not text:
        return None
    if text in _TRUE | _FALSE:
        return text in _TRUE
    try:
        return _float(json.loads(text)) if text[0] in "-0123456789." else value
    except (ValueError, TypeError):
        return value


def _float(number: float) -> float:
    """``number`` as a float; an integer past the largest float is infinite (which the
    verdict's check refuses as not finite), not an OverflowError."""
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


def _moment(text: str | None) -> datetime | None:
    """``created_at`` as an aware UTC datetime (ISO 8601; no zone means UTC)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"created_at {text!r} is not an ISO 8601 date/time") from None
    try:
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-05:00 is past year 9999 in UTC
        raise ValueError(f"created_at {text!r} is out of range in UTC") from None

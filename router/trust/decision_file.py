"""The routing decision log as a file: what ``trustroute export --decisions`` writes and
``trustroute import-decisions`` reads back, one JSON line per decision.

A row is a decision as the log keeps it (docs/trust.md): ``id``, ``task_type``,
``agent_id``, ``strategy``, the raw ``predicted`` success and calibrated ``confidence``,
``tier``, ``abstained`` with its reason and detail, the ranked ``candidates`` and how many
there were, ``created_at``, and its outcome when one was recorded (``success``,
``quality``, ``record_id``, ``recorded_at``). Times are ISO 8601 with a zone.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import AwareDatetime, Field, StrictBool, StrictInt, StrictStr

from trustroute.profiles.records import iso_z
from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.router.row_files import FileRow, Identifier, model_rows


def share() -> Any:
    """An optional share in [0, 1]."""
    return Field(default=None, ge=0, le=1, allow_inf_nan=False)


class DecisionFileRow(FileRow):
    """One logged routing decision, with its outcome when it has one."""

    id: Identifier
    task_type: Identifier
    agent_id: StrictStr
    strategy: StrictStr
    predicted: float | None = share()
    confidence: float | None = share()
    tier: StrictStr | None = None
    abstained: StrictBool
    abstain_reason: StrictStr | None = None
    abstain_detail: StrictStr | None = None
    candidates: list[dict[str, Any]]
    candidate_count: StrictInt | None = Field(default=None, ge=0)
    created_at: AwareDatetime
    success: StrictBool | None = None
    quality: float | None = share()
    record_id: StrictStr | None = None
    recorded_at: AwareDatetime | None = None


def read_decisions(path: Path) -> Iterator[DecisionFileRow]:
    """The decisions of a file, checked, streamed; the first problem raises
    RowFileError naming its line and field."""
    return model_rows(path, lambda line, raw: DecisionFileRow)


def decision_rows(store: Store) -> Iterator[dict[str, Any]]:
    """The store's decision log as the file's rows, oldest first."""
    for row in store.repository(DecisionRepository).scan():
        yield {k: iso_z(v) if isinstance(v, datetime) else v for k, v in row.items()
               if v is not None}

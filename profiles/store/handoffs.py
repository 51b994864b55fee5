"""Hand-off persistence: pending transfers, the decision log, saved calibrations.

- ``handoff_pending``: one row per (request, hook), written *pending* before the hook is
  tried and marked *delivered* when it succeeds, so no request to a person is ever lost
  (not even to SIGKILL); what failed keeps its last error; ``trustroute handoffs`` lists
  the pending ones, and they can be retried or resolved. A row's status only moves
  forward, pending -> delivered -> resolved: every change is one ``UPDATE ... WHERE
  status = $expected`` on the row's id whose result says whether it applied, so a late
  failure never reopens a delivered or resolved row.
- ``handoff_decision``: one row per answer-or-transfer decision, with its task type, so
  the hand-off rate per task type can be shown next to the agents' profiles.
- ``handoff_calibration``: named threshold settings learned by ``calibrate``, so a
  router config can refer to them by name.

Request payloads, settings and reports are stored as JSON text, not as SurrealDB objects:
an object field drops keys whose value is null, and null is meaningful here (for example
``max_evidence_tokens: null`` means "no limit", not "the default").
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from trustroute.profiles.records import check_identifier
from trustroute.profiles.store.connection import Connection
from trustroute.profiles.store.params import storable

PENDING_STATUSES = ("pending", "delivered", "resolved")  # the order a row moves in
_ROW = "type::thing('handoff_pending', [$rid, $hook])"
_AGO = "time::now() - duration::from::millis($ms)"  # the database's clock, not the caller's
_NOT_HELD = "(not_before = NONE OR not_before <= time::now())"  # no Retry-After pending
_COLUMNS = (
    "request_id, hook, request, reason, task_type, error, attempts, status, created_at, "
    "updated_at, delivered_at, resolved_at"
)


class HandoffRepository:
    """SurrealQL for hand-off state (use ``store.repository(HandoffRepository)``)."""

    SCHEMA = """
DEFINE TABLE IF NOT EXISTS handoff_pending SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS request_id ON handoff_pending TYPE string
    ASSERT string::len($value) > 0 AND string::len($value) <= 256;
DEFINE FIELD IF NOT EXISTS hook ON handoff_pending TYPE string
    ASSERT string::len($value) > 0 AND string::len($value) <= 256;
DEFINE FIELD IF NOT EXISTS request ON handoff_pending TYPE string;
DEFINE FIELD IF NOT EXISTS reason ON handoff_pending TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON handoff_pending TYPE option<string>;
DEFINE FIELD IF NOT EXISTS error ON handoff_pending TYPE string;
DEFINE FIELD IF NOT EXISTS attempts ON handoff_pending TYPE int ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS status ON handoff_pending TYPE string
    ASSERT $value INSIDE ['pending', 'delivered', 'resolved'];
DEFINE FIELD IF NOT EXISTS created_at ON handoff_pending TYPE datetime;
DEFINE FIELD IF NOT EXISTS updated_at ON handoff_pending TYPE datetime;
DEFINE FIELD IF NOT EXISTS delivered_at ON handoff_pending TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS resolved_at ON handoff_pending TYPE option<datetime>;
-- not retried by a sweep before this (a receiver's Retry-After); absent: due by age alone
DEFINE FIELD IF NOT EXISTS not_before ON handoff_pending TYPE option<datetime>;
-- when a delivery first took the row (a queued one, or a sweep's): absent, nobody has
DEFINE FIELD IF NOT EXISTS claimed_at ON handoff_pending TYPE option<datetime>;
DEFINE INDEX IF NOT EXISTS handoff_pending_status ON handoff_pending FIELDS status;

DEFINE TABLE IF NOT EXISTS handoff_decision SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS task_type ON handoff_decision TYPE string
    ASSERT string::len($value) > 0 AND string::len($value) <= 256;
DEFINE FIELD IF NOT EXISTS transferred ON handoff_decision TYPE bool;
DEFINE FIELD IF NOT EXISTS confidence ON handoff_decision TYPE option<float>
    ASSERT $value = NONE OR ($value >= 0 AND $value <= 1);
DEFINE FIELD IF NOT EXISTS insufficient ON handoff_decision TYPE bool;
DEFINE FIELD IF NOT EXISTS reason ON handoff_decision TYPE option<string>;
DEFINE FIELD IF NOT EXISTS source ON handoff_decision TYPE string;
DEFINE FIELD IF NOT EXISTS run_id ON handoff_decision TYPE option<string>;
DEFINE FIELD IF NOT EXISTS request_id ON handoff_decision TYPE option<string>;
DEFINE FIELD IF NOT EXISTS created_at ON handoff_decision TYPE datetime;
DEFINE INDEX IF NOT EXISTS handoff_decision_task ON handoff_decision FIELDS task_type;

DEFINE TABLE IF NOT EXISTS handoff_calibration SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS name ON handoff_calibration TYPE string
    ASSERT string::len($value) > 0 AND string::len($value) <= 256;
DEFINE FIELD IF NOT EXISTS settings ON handoff_calibration TYPE string;
DEFINE FIELD IF NOT EXISTS report ON handoff_calibration TYPE option<string>;
DEFINE FIELD IF NOT EXISTS created_at ON handoff_calibration TYPE datetime;
"""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    # -- pending transfers -------------------------------------------------------------
    def save_pending(
        self, request: Mapping[str, Any], *, hook: str, error: str, attempts: int = 0
    ) -> str:
        """Store ``request`` for ``hook`` as pending unless it is stored already (the same
        request accepted again keeps its row as it is); returns the row's status."""
        rows = self._conn.run(
            f"UPSERT {_ROW} SET request_id = $rid, hook = $hook, "
            "request = request ?? $request, reason = reason ?? $reason, "
            "task_type = task_type ?? $task_type, "
            "error = error ?? $error, attempts = attempts ?? $attempts, "
            "status = status ?? 'pending', created_at = created_at ?? time::now(), "
            "updated_at = updated_at ?? time::now() RETURN status;",
            {
                "rid": str(request["request_id"]),
                "hook": hook,
                "request": storable(json.dumps(dict(request), default=str,
                                               ensure_ascii=False)),
                "reason": storable(str(request.get("reason") or "")),
                "task_type": request.get("task_type"),
                "error": storable(error),
                "attempts": int(attempts),
            },
        )[0]
        return str(rows[0]["status"])

    def mark_failed(self, request_id: str, hook: str, *, error: str, attempts: int,
                    retry_after_s: float | None = None) -> bool:
        """Count ``attempts`` more failed tries and keep ``error`` as the last one, only
        while the row is pending (a delivered or resolved row stays so); no sweep tries it
        again before ``retry_after_s`` (what the receiver asked). True: applied."""
        return self._update(
            request_id, hook, "pending",
            "error = $error, attempts += $attempts, updated_at = time::now(), "
            "not_before = time::now() + duration::from::millis($wait)",
            {"error": storable(error), "attempts": int(attempts),
             "wait": max(0, round((retry_after_s or 0.0) * 1000))},
        )

    def mark_delivered(self, request_id: str, hook: str, attempts: int = 0) -> bool:
        """Mark one (request, hook) row delivered, counting the ``attempts`` it took and
        clearing the last error, only while it is pending. True when it changed."""
        return self._update(
            request_id, hook, "pending",
            "status = 'delivered', error = '', attempts += $attempts, "
            "delivered_at = time::now(), updated_at = time::now()",
            {"attempts": int(attempts)},
        )

    def _update(self, request_id: str, hook: str, expected: str, changes: str,
                params: Mapping[str, Any]) -> bool:
        """One compare-and-set statement on the row's id; True when it applied."""
        rows = self._conn.run(
            f"UPDATE {_ROW} SET {changes} WHERE status = $expected RETURN status;",
            {**params, "rid": request_id, "hook": hook, "expected": expected},
        )[0]
        return bool(rows)

    def set_status(self, request_id: str, status: str) -> int:
        """Move every hook's row of a request forward to ``status`` (pending -> delivered
        -> resolved; a row already there or past it is left alone); returns rows changed."""
        _check_status(status)
        before = list(PENDING_STATUSES[: PENDING_STATUSES.index(status)])
        stamp = {"delivered": ", delivered_at = time::now()",
                 "resolved": ", resolved_at = time::now()"}.get(status, "")
        rows = self._conn.run(
            f"UPDATE handoff_pending SET status = $status, updated_at = time::now(){stamp} "
            "WHERE request_id = $rid AND status INSIDE $before RETURN status;",
            {"status": status, "rid": request_id, "before": before},
        )[0]
        return len(rows or [])

    def pending(
        self,
        status: str | None = "pending",
        limit: int = 100,
        *,
        hooks: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Stored transfers with ``status`` (None: every status), oldest first; only those
        of ``hooks`` when given (``due`` gives a retry sweep's). ``error`` is None on a row
        that has none (delivered, or not tried yet)."""
        if status is not None:
            _check_status(status)
        where = [
            clause
            for clause, given in (
                ("status = $status", status),
                ("hook INSIDE $hooks", hooks is not None),
            )
            if given
        ]
        rows = self._conn.run(
            f"SELECT {_COLUMNS} FROM handoff_pending"
            f"{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY created_at "
            "LIMIT $limit;",
            {"status": status, "hooks": list(hooks or []), "limit": int(limit)},
        )[0]
        return _requests(rows)

    def due(self, hook: str, unchanged_s: float, limit: int = 100) -> list[dict[str, Any]]:
        """A retry sweep's rows: ``hook``'s pending rows unchanged for ``unchanged_s`` by
        the database's clock (the one that stamped them, whatever the caller's says),
        least recently tried first, so rows refused again and again wait their turn
        behind rows not tried for longer and never starve them."""
        rows = self._conn.run(
            f"SELECT {_COLUMNS} FROM handoff_pending WHERE status = 'pending' AND hook = $hook "
            f"AND updated_at < {_AGO} AND {_NOT_HELD} ORDER BY updated_at LIMIT $limit;",
            {"hook": hook, "ms": round(unchanged_s * 1000), "limit": int(limit)},
        )[0]
        return _requests(rows)

    def held(self) -> tuple[int, datetime | None]:
        """Pending rows no retry may try yet (their receiver's Retry-After), and the
        latest moment one becomes due."""
        rows = self._conn.run(
            "SELECT count() AS n, time::max(not_before) AS until FROM handoff_pending "
            "WHERE status = 'pending' AND not_before > time::now() GROUP ALL;")[0]
        return (int(rows[0]["n"]), rows[0]["until"]) if rows else (0, None)

    def pending_by_hook(self, exclude: Sequence[str] = ()) -> dict[str, int]:
        """How many pending rows each hook has, leaving out the hooks in ``exclude``."""
        rows = self._conn.run(
            "SELECT hook, count() AS rows FROM handoff_pending WHERE status = 'pending' "
            "AND hook NOTINSIDE $exclude GROUP BY hook ORDER BY hook;",
            {"exclude": list(exclude)},
        )[0]
        return {r["hook"]: r["rows"] for r in rows or []}

    # -- decision log ------------------------------------------------------------------
    def record_decision(
        self,
        *,
        task_type: str,
        transferred: bool,
        confidence: float | None,
        insufficient: bool,
        reason: str | None,
        source: str = "handoff",
        run_id: str | None = None,
        request_id: str | None = None,
    ) -> str:
        """Append one answer-or-transfer decision; returns its id."""
        decision_id = str(uuid.uuid4())
        self._conn.run(
            "CREATE type::thing('handoff_decision', $id) CONTENT { task_type: $task_type, "
            "transferred: $transferred, confidence: $confidence, insufficient: $insufficient, "
            "reason: $reason, source: $source, run_id: $run_id, request_id: $request_id, "
            "created_at: time::now() };",
            {
                "id": decision_id,
                "task_type": task_type,
                "transferred": bool(transferred),
                "confidence": None if confidence is None else float(confidence),
                "insufficient": bool(insufficient),
                "reason": None if reason is None else storable(reason),
                "source": source,
                "run_id": run_id,
                "request_id": request_id,
            },
        )
        return decision_id

    def decision_stats(self, task_type: str | None = None) -> list[dict[str, Any]]:
        """Per task type: decisions, transfers, hand-off rate and mean confidence."""
        where = " WHERE task_type = $task_type" if task_type else ""
        rows = self._conn.run(
            "SELECT task_type, count() AS decisions, count(transferred) AS transferred, "
            "math::mean(confidence) AS mean_confidence "  # NONE left out; none at all: NaN
            f"FROM handoff_decision{where} GROUP BY task_type ORDER BY task_type;",
            {"task_type": task_type},
        )[0]
        return [
            {
                "task_type": r["task_type"],
                "decisions": r["decisions"],
                "transferred": r["transferred"],
                "handoff_rate": r["transferred"] / r["decisions"],
                "mean_confidence": (
                    None if math.isnan(r["mean_confidence"]) else r["mean_confidence"]
                ),
            }
            for r in rows or []
        ]

    # -- calibrations ------------------------------------------------------------------
    def save_calibration(
        self, name: str, settings: Mapping[str, Any], report: Mapping[str, Any] | None
    ) -> None:
        """Save (or replace) the calibration ``name``."""
        check_identifier(name, "calibration name")  # a name shown and typed, like an id
        self._conn.run(
            "UPSERT type::thing('handoff_calibration', $name) CONTENT { name: $name, "
            "settings: $settings, report: $report, created_at: time::now() };",
            {
                "name": name,
                "settings": json.dumps(dict(settings)),
                "report": None if report is None else json.dumps(dict(report), default=str),
            },
        )

    def load_calibration(self, name: str) -> dict[str, Any] | None:
        """The saved calibration ``name`` (settings, report, created_at) or None."""
        rows = self._conn.run(
            "SELECT name, settings, report, created_at FROM "
            "type::thing('handoff_calibration', $name);",
            {"name": name},
        )[0]
        if not rows:
            return None
        report = rows[0].get("report")
        return {
            **rows[0],
            "settings": json.loads(rows[0]["settings"]),
            "report": json.loads(report) if report else None,
        }


def _check_status(status: str) -> None:
    if status not in PENDING_STATUSES:
        raise ValueError(f"status must be one of {', '.join(PENDING_STATUSES)}, got {status!r}")


def _requests(rows: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Pending rows as callers read them: the request parsed, no error as None."""
    return [{**r, "request": json.loads(r["request"]), "error": r.get("error") or None}
            for r in rows or []]

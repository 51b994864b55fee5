"""Hand-off state read whole and written back: what ``trustroute export --handoffs``
and ``trustroute import-handoffs`` move from one store to another.

Three tables travel: the transfers (``handoff_pending``, every status: a pending one is
a person still waiting), the answer-or-transfer decision log and the saved
calibrations. Writing them back keeps each rule of the tables:

- a transfer row absent here is created as it was; one present only moves *forward*
  (pending -> delivered -> resolved), in the same compare-and-set as a delivery's mark,
  so an import never reopens what was delivered or resolved here;
- a decision is appended once, by its id;
- a calibration absent here is created; one present is replaced only by a newer one.

So importing the same file twice changes nothing the second time. A row's delivery
claim and Retry-After are the exporting workers' and are not carried: the importing
store's workers treat its pending rows as theirs to deliver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from surrealdb import RecordID

from trustroute.profiles.store.connection import Connection
from trustroute.profiles.store.handoffs import PENDING_STATUSES, HandoffRepository
from trustroute.profiles.store.params import storable

_TRANSFER_COLUMNS = (
    "request_id, hook, request, reason, task_type, error, attempts, status, created_at, "
    "updated_at, delivered_at, resolved_at"
)
_DECISION_COLUMNS = (
    "record::id(id) AS id, task_type, transferred, confidence, insufficient, reason, "
    "source, run_id, request_id, created_at"
)

_WRITE_TRANSFERS = """
BEGIN TRANSACTION;
FOR $r IN $rows {
    LET $at = type::thing('handoff_pending', [$r.row.request_id, $r.row.hook]);
    IF record::exists($at) {
        UPDATE $at SET status = $r.row.status, updated_at = time::now(),
            delivered_at = delivered_at ?? $r.row.delivered_at,
            resolved_at = resolved_at ?? $r.row.resolved_at
            WHERE status INSIDE $r.before;
    } ELSE {
        CREATE $at CONTENT $r.row;
    };
};
COMMIT TRANSACTION;
"""

_WRITE_DECISIONS = """
BEGIN TRANSACTION;
FOR $d IN $rows {
    LET $at = type::thing('handoff_decision', $d.id);
    IF !record::exists($at) { CREATE $at CONTENT $d.row; };
};
COMMIT TRANSACTION;
"""

_WRITE_CALIBRATIONS = """
BEGIN TRANSACTION;
FOR $c IN $rows {
    LET $at = type::thing('handoff_calibration', $c.name);
    IF record::exists($at) {
        UPDATE $at CONTENT $c WHERE created_at < $c.created_at;
    } ELSE {
        CREATE $at CONTENT $c;
    };
};
COMMIT TRANSACTION;
"""


class HandoffArchive:
    """SurrealQL that reads and writes back whole hand-off tables (use
    ``store.repository(HandoffArchive)``)."""

    SCHEMA = HandoffRepository.SCHEMA  # an importing store may have none of the tables

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    # -- reading -----------------------------------------------------------------------
    def transfers(self, batch: int = 5000) -> Iterator[dict[str, Any]]:
        """Every transfer row, oldest first, its request parsed; no error is None."""
        for page in self._conn.pages(f"SELECT {_TRANSFER_COLUMNS} FROM handoff_pending "
                                     "ORDER BY created_at, request_id, hook", {}, batch):
            for row in page:
                yield {**row, "request": json.loads(row["request"]),
                       "error": row.get("error") or None}

    def decisions(self, batch: int = 5000) -> Iterator[dict[str, Any]]:
        """Every answer-or-transfer decision, oldest first."""
        for page in self._conn.pages(f"SELECT {_DECISION_COLUMNS} FROM handoff_decision "
                                     "ORDER BY created_at, id", {}, batch):
            yield from page

    def calibrations(self) -> list[dict[str, Any]]:
        """Every saved calibration, its settings and report parsed."""
        rows = self._conn.run("SELECT name, settings, report, created_at FROM "
                              "handoff_calibration ORDER BY name;")[0]
        return [{**r, "settings": json.loads(r["settings"]),
                 "report": json.loads(r["report"]) if r.get("report") else None}
                for r in rows or []]

    def counts(self) -> dict[str, int]:
        """How many transfer rows (and of them pending), decisions and calibrations."""
        counted = {
            "transfers": "handoff_pending",
            "pending": "handoff_pending WHERE status = 'pending'",
            "decisions": "handoff_decision",
            "calibrations": "handoff_calibration",
        }
        sql = "".join(f"SELECT count() AS n FROM {what} GROUP ALL;" for what in counted.values())
        answers = self._conn.run(sql)
        return {name: int(rows[0]["n"]) if rows else 0
                for name, rows in zip(counted, answers, strict=True)}

    # -- writing back --------------------------------------------------------------------
    def put_transfers(self, rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """Write transfer rows (``transfers``' shape) back, one transaction: (created,
        moved forward); a row whose status here is the same or further is left."""
        ids = [RecordID("handoff_pending", [r["request_id"], r["hook"]]) for r in rows]
        here = {(r[0], r[1]): r[2] for r in self._conn.run(
            "SELECT VALUE [request_id, hook, status] FROM $ids;", {"ids": ids})[0] or []}
        writes, created, moved = [], set(), set()
        for row in rows:
            key, status = (row["request_id"], row["hook"]), row["status"]
            before = list(PENDING_STATUSES[: PENDING_STATUSES.index(status)])
            if key not in here:
                created.add(key)
            elif here[key] in before:
                moved.add(key)
            writes.append({"before": before, "row": _transfer(row)})
        if writes:
            self._conn.run(_WRITE_TRANSFERS, {"rows": writes}, rows=len(writes))
        return len(created), len(moved)

    def put_decisions(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Append decision rows (``decisions``' shape) not stored yet; how many."""
        ids = [RecordID("handoff_decision", r["id"]) for r in rows]
        here = set(self._conn.run("SELECT VALUE record::id(id) FROM $ids;",
                                  {"ids": ids})[0] or [])
        new = {r["id"] for r in rows} - here
        if rows:
            self._conn.run(_WRITE_DECISIONS, {"rows": [
                {"id": r["id"], "row": {k: v for k, v in r.items() if k != "id"}}
                for r in rows]}, rows=len(rows))
        return len(new)

    def put_calibrations(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Write calibrations (``calibrations``' shape) absent here or newer than the
        one here; how many."""
        names = [RecordID("handoff_calibration", r["name"]) for r in rows]
        here = {r["name"]: r["created_at"] for r in self._conn.run(
            "SELECT name, created_at FROM $ids;", {"ids": names})[0] or []}
        taken = {r["name"] for r in rows
                 if r["name"] not in here or here[r["name"]] < r["created_at"]}
        if rows:
            self._conn.run(_WRITE_CALIBRATIONS, {"rows": [
                {"name": r["name"], "settings": json.dumps(r["settings"]),
                 "report": None if r["report"] is None else json.dumps(r["report"]),
                 "created_at": r["created_at"]} for r in rows]})
        return len(taken)


def _transfer(row: Mapping[str, Any]) -> dict[str, Any]:
    """A transfer as its table keeps it: the request as JSON text, text made storable."""
    return {
        "request_id": row["request_id"], "hook": row["hook"],
        "request": storable(json.dumps(dict(row["request"]), ensure_ascii=False)),
        "reason": storable(row["reason"]), "task_type": row.get("task_type"),
        "error": storable(row.get("error") or ""), "attempts": int(row["attempts"]),
        "status": row["status"], "created_at": row["created_at"],
        "updated_at": row["updated_at"], "delivered_at": row.get("delivered_at"),
        "resolved_at": row.get("resolved_at"),
    }

"""The decision log: every routing decision, joined with its outcome when recorded.

Anyone can check the router's honesty from this table: what it predicted (raw and
calibrated confidence), whether it abstained and why, who the candidates were, and what
actually happened. Rows are written in batches by the router (never from ``select``);
an outcome that arrives after its decision was written is merged into the row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from surrealdb import RecordID

from trustroute.profiles.store.connection import Connection

SCHEMA = """
DEFINE TABLE IF NOT EXISTS decision SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS task_type ON decision TYPE string;
DEFINE FIELD IF NOT EXISTS agent_id ON decision TYPE string;
DEFINE FIELD IF NOT EXISTS strategy ON decision TYPE string;
DEFINE FIELD IF NOT EXISTS predicted ON decision TYPE option<float>
    ASSERT $value = NONE OR ($value >= 0 AND $value <= 1);
DEFINE FIELD IF NOT EXISTS confidence ON decision TYPE option<float>
    ASSERT $value = NONE OR ($value >= 0 AND $value <= 1);
DEFINE FIELD IF NOT EXISTS tier ON decision TYPE option<string>;
DEFINE FIELD IF NOT EXISTS abstained ON decision TYPE bool;
DEFINE FIELD IF NOT EXISTS abstain_reason ON decision TYPE option<string>;
DEFINE FIELD IF NOT EXISTS abstain_detail ON decision TYPE option<string>;
DEFINE FIELD IF NOT EXISTS candidates ON decision FLEXIBLE TYPE array<object>;
DEFINE FIELD IF NOT EXISTS candidate_count ON decision TYPE option<int>;
DEFINE FIELD IF NOT EXISTS created_at ON decision TYPE datetime;
DEFINE FIELD IF NOT EXISTS success ON decision TYPE option<bool>;
DEFINE FIELD IF NOT EXISTS quality ON decision TYPE option<float>
    ASSERT $value = NONE OR ($value >= 0 AND $value <= 1);
DEFINE FIELD IF NOT EXISTS record_id ON decision TYPE option<string>;
DEFINE FIELD IF NOT EXISTS recorded_at ON decision TYPE option<datetime>;
DEFINE INDEX IF NOT EXISTS decision_created ON decision FIELDS created_at;
DEFINE INDEX IF NOT EXISTS decision_recorded ON decision FIELDS recorded_at;

-- The calibration map's learned sums per strategy, so a reopened router starts calibrated
-- without scanning the log.
DEFINE TABLE IF NOT EXISTS calibration_state SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS state ON calibration_state FLEXIBLE TYPE object;
DEFINE FIELD IF NOT EXISTS updated_at ON calibration_state TYPE datetime;
"""

# $rows: full decision rows (outcome fields may be set); $outcomes: outcomes (success,
# quality, record_id, recorded_at) for rows written earlier (an unknown id is a no-op:
# UPDATE never creates).
_WRITE = """
BEGIN TRANSACTION;
FOR $r IN $rows { UPSERT type::thing('decision', $r.id) CONTENT $r.row; };
FOR $o IN $outcomes {
    UPDATE type::thing('decision', $o.id) SET success = $o.success, quality = $o.quality,
        record_id = $o.record_id, recorded_at = $o.recorded_at;
};
COMMIT TRANSACTION;
"""

# A batch read back from a file (``trustroute import-decisions``): a decision absent here
# is stored as it was; one present only gains the outcome it lacks (an outcome, once
# joined, stays). A strategy's saved calibration sums are dropped when imported outcomes
# join its decisions: the map is rebuilt from the log at the next open (``load``).
_IMPORT = """
BEGIN TRANSACTION;
FOR $r IN $rows {
    LET $at = type::thing('decision', $r.id);
    IF record::exists($at) {
        UPDATE $at SET success = $r.row.success, quality = $r.row.quality,
            record_id = $r.row.record_id, recorded_at = $r.row.recorded_at
            WHERE recorded_at = NONE AND $r.row.recorded_at != NONE;
    } ELSE {
        CREATE $at CONTENT $r.row;
    };
};
DELETE calibration_state WHERE record::id(id) INSIDE $joined;
COMMIT TRANSACTION;
"""


class DecisionRepository:
    """Writes and reads the decision log."""

    SCHEMA = SCHEMA

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def write(self, rows: Mapping[str, dict[str, Any]],
              outcomes: Mapping[str, dict[str, Any]]) -> None:
        """Store decisions and late outcomes (each by decision id), one transaction."""
        if rows or outcomes:
            self._conn.run(_WRITE, {"rows": [{"id": k, "row": r} for k, r in rows.items()],
                                    "outcomes": [{"id": k, **o} for k, o in outcomes.items()]})

    def save_calibration(self, strategy: str, state: dict[str, Any]) -> None:
        """Keep the calibration map's sums for ``strategy`` (last writer wins)."""
        self._conn.run("UPSERT type::thing('calibration_state', $s) CONTENT "
                       "{state: $state, updated_at: time::now()};",
                       {"s": strategy, "state": state})

    def load_calibration(self, strategy: str) -> dict[str, Any] | None:
        """The saved calibration sums for ``strategy``, or None."""
        rows = self._conn.run("SELECT state FROM ONLY type::thing('calibration_state', $s);",
                              {"s": strategy})
        return rows[0]["state"] if rows and rows[0] else None

    def get(self, decision_id: str) -> dict[str, Any] | None:
        """One decision with its outcome, or None."""
        rows = self._conn.run(
            "SELECT *, record::id(id) AS decision_id OMIT id FROM ONLY "
            "type::thing('decision', $id);", {"id": decision_id})
        return rows[0] if rows and rows[0] else None

    def count(self) -> int:
        """Number of logged decisions."""
        rows = self._conn.run("SELECT count() AS n FROM decision GROUP ALL;")
        return int(rows[0][0]["n"]) if rows[0] else 0

    def strategy_counts(self) -> dict[str, int]:
        """Logged decisions per strategy name."""
        rows = self._conn.run("SELECT strategy, count() AS n FROM decision GROUP BY strategy;")
        return {str(r["strategy"]): int(r["n"]) for r in rows[0] if r.get("strategy")}

    def calibration_pairs(self, strategy: str, limit: int) -> list[tuple[float, bool]]:
        """The latest ``limit`` (predicted, success) pairs of ``strategy``, oldest first."""
        rows = self._conn.run(
            "SELECT predicted, success, recorded_at FROM decision WHERE strategy = $s "
            "AND success != NONE AND predicted != NONE ORDER BY recorded_at DESC LIMIT $n;",
            {"s": strategy, "n": limit})[0]
        return [(float(r["predicted"]), bool(r["success"])) for r in reversed(rows)]

    def confidence_outcomes(self, strategy: str | None = None
                            ) -> list[tuple[float | None, bool | None, bool]]:
        """(confidence, success or None, abstained) of every logged decision (of
        ``strategy``, when given): what a calibration report is computed from."""
        where = " WHERE strategy = $s" if strategy else ""
        rows = self._conn.run("SELECT VALUE [confidence, success, abstained] "
                              f"FROM decision{where};", {"s": strategy})[0]
        return [(c, s, bool(a)) for c, s, a in rows]

    def scan(self, batch: int = 5000) -> Iterator[dict[str, Any]]:
        """Every logged decision with its id, oldest first (``export --decisions``)."""
        for page in self._conn.pages("SELECT *, record::id(id) AS id FROM decision "
                                     "ORDER BY created_at, id", {}, batch):
            yield from page

    def put(self, rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """Store decisions read back from a file (``scan``'s shape), one transaction:
        (stored, outcomes joined to decisions stored without one)."""
        ids = [RecordID("decision", r["id"]) for r in rows]
        here = {r["id"]: r["joined"] for r in self._conn.run(
            "SELECT record::id(id) AS id, recorded_at != NONE AS joined FROM $ids;",
            {"ids": ids})[0] or []}
        new = {r["id"] for r in rows} - set(here)
        joined = {r["id"] for r in rows if r.get("recorded_at") is not None
                  and r["id"] in here and not here[r["id"]]}
        strategies = sorted({r["strategy"] for r in rows if r.get("recorded_at") is not None
                             and (r["id"] in new or r["id"] in joined)})
        if rows:
            self._conn.run(_IMPORT, {"rows": [
                {"id": r["id"], "row": {k: v for k, v in r.items() if k != "id"}}
                for r in rows], "joined": strategies}, rows=len(rows))
        return len(new), len(joined)

"""What people and signals said, the lifecycle's marks, history and the archive.

Feedback, reviews and named signals are appended to ``trust_feedback`` at once, one row
each, under a client-generated id and stamped ``stored_at`` by the database: with the
execution log they are what every router folds its trust counts from (nothing here is a
counter other processes also increment). The weekly lifecycle job writes
``trust_lifecycle`` (decay offsets and deprecation marks, guarded by the ISO week, so a
second run in the same week changes nothing). Retiring a profile moves its executions to
``execution_archive`` and its feedback into ``trust_archive`` in the transaction that
deletes them: history is moved, never lost.

This repository is a writer (``profiles.store.writers``) of three tables: each append to
``trust_feedback``, each lifecycle run (the marks it changed carry its number) and each
retirement bumps its own counter in the same transaction, so other routers find them
by counter, never by stamp.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from trustroute.profiles.store import writers
from trustroute.profiles.store.connection import Connection, QueryFailed

#: The tables other routers follow by this repository's counters.
PEOPLE, LIFECYCLE, ARCHIVE = "trust_feedback", "trust_lifecycle", "trust_archive"

SCHEMA = """
-- The lifecycle job's marks per pair (decay offsets subtracted from [frequency,
-- effectiveness, human] while the pair stays unseen; the deprecation mark).
DEFINE TABLE IF NOT EXISTS trust_lifecycle SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON trust_lifecycle TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON trust_lifecycle TYPE string;
DEFINE FIELD IF NOT EXISTS decay ON trust_lifecycle TYPE array<float>
    ASSERT array::len($value) = 3 AND math::min($value) >= 0;
DEFINE FIELD IF NOT EXISTS decayed_at ON trust_lifecycle TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS decay_week ON trust_lifecycle TYPE option<string>;
DEFINE FIELD IF NOT EXISTS deprecated_at ON trust_lifecycle TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS changed_at ON trust_lifecycle TYPE datetime;
DEFINE FIELD IF NOT EXISTS writer ON trust_lifecycle TYPE option<string>;
DEFINE FIELD IF NOT EXISTS wseq ON trust_lifecycle TYPE option<int>;
DEFINE INDEX IF NOT EXISTS trust_lifecycle_writer ON trust_lifecycle FIELDS writer, wseq;

DEFINE TABLE IF NOT EXISTS trust_history SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON trust_history TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON trust_history TYPE string;
DEFINE FIELD IF NOT EXISTS frequency ON trust_history TYPE float ASSERT $value >= 0 AND $value <= 1;
DEFINE FIELD IF NOT EXISTS effectiveness ON trust_history TYPE float
    ASSERT $value >= 0 AND $value <= 1;
DEFINE FIELD IF NOT EXISTS human ON trust_history TYPE float ASSERT $value >= 0 AND $value <= 1;
DEFINE FIELD IF NOT EXISTS composite ON trust_history TYPE float ASSERT $value >= 0 AND $value <= 1;
DEFINE FIELD IF NOT EXISTS tier ON trust_history TYPE string;
DEFINE FIELD IF NOT EXISTS reason ON trust_history TYPE string;
DEFINE FIELD IF NOT EXISTS at ON trust_history TYPE datetime;
DEFINE INDEX IF NOT EXISTS trust_history_pair ON trust_history FIELDS agent_id, task_type, at;

DEFINE TABLE IF NOT EXISTS trust_feedback SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON trust_feedback TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON trust_feedback TYPE string;
DEFINE FIELD IF NOT EXISTS decision_id ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS approved ON trust_feedback TYPE option<bool>;
DEFINE FIELD IF NOT EXISTS kind ON trust_feedback TYPE string
    ASSERT $value IN ['feedback', 'review', 'signal'];
DEFINE FIELD IF NOT EXISTS signal ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS comment ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS at ON trust_feedback TYPE datetime;
DEFINE FIELD IF NOT EXISTS stored_at ON trust_feedback TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS writer ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS wseq ON trust_feedback TYPE option<int>;
DEFINE INDEX IF NOT EXISTS trust_feedback_writer ON trust_feedback FIELDS writer, wseq;
-- Feedback on one execution (docs/feedback.md): the ref as given, the execution it
-- resolved to (NONE while only its decision is known), the key and the score as given
-- (a verdict is approved or a score; the key's scale maps a score onto [0, 1]).
DEFINE FIELD IF NOT EXISTS ref ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS record_id ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS key ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS score ON trust_feedback TYPE option<float>;
DEFINE INDEX IF NOT EXISTS trust_feedback_pair ON trust_feedback FIELDS agent_id, task_type;

DEFINE TABLE IF NOT EXISTS trust_run SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS week ON trust_run TYPE string;
DEFINE FIELD IF NOT EXISTS decayed ON trust_run TYPE int;
DEFINE FIELD IF NOT EXISTS deprecated ON trust_run TYPE int;
DEFINE FIELD IF NOT EXISTS deleted ON trust_run TYPE int;
DEFINE FIELD IF NOT EXISTS at ON trust_run TYPE datetime;

DEFINE TABLE IF NOT EXISTS execution_archive SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON execution_archive TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON execution_archive TYPE string;
DEFINE FIELD IF NOT EXISTS success ON execution_archive TYPE bool;
DEFINE FIELD IF NOT EXISTS quality ON execution_archive TYPE float;
DEFINE FIELD IF NOT EXISTS latency_ms ON execution_archive TYPE float;
DEFINE FIELD IF NOT EXISTS cost ON execution_archive TYPE option<float>;
DEFINE FIELD IF NOT EXISTS timestamp ON execution_archive TYPE datetime;
DEFINE FIELD IF NOT EXISTS decision_id ON execution_archive TYPE option<string>;
DEFINE FIELD IF NOT EXISTS metadata ON execution_archive FLEXIBLE TYPE object;
DEFINE FIELD IF NOT EXISTS seq ON execution_archive TYPE option<int>;
DEFINE FIELD IF NOT EXISTS quality_given ON execution_archive TYPE option<bool>;
DEFINE FIELD IF NOT EXISTS run_ids ON execution_archive TYPE option<array<string>>;
DEFINE FIELD IF NOT EXISTS stored_at ON execution_archive TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS pos ON execution_archive TYPE option<int>;
DEFINE FIELD IF NOT EXISTS writer ON execution_archive TYPE option<string>;
DEFINE FIELD IF NOT EXISTS wseq ON execution_archive TYPE option<int>;
DEFINE FIELD IF NOT EXISTS archived_at ON execution_archive TYPE datetime;
DEFINE INDEX IF NOT EXISTS execution_archive_pair ON execution_archive FIELDS agent_id, task_type;

DEFINE TABLE IF NOT EXISTS trust_archive SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON trust_archive TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON trust_archive TYPE string;
DEFINE FIELD IF NOT EXISTS trust ON trust_archive FLEXIBLE TYPE object;
DEFINE FIELD IF NOT EXISTS profile ON trust_archive FLEXIBLE TYPE option<object>;
DEFINE FIELD IF NOT EXISTS archived_at ON trust_archive TYPE datetime;
DEFINE FIELD IF NOT EXISTS feedback ON trust_archive FLEXIBLE TYPE option<array<object>>;
DEFINE FIELD IF NOT EXISTS stored_at ON trust_archive TYPE option<datetime>;
""" + writers.SCHEMA

_PEOPLE = ("record::id(id) AS id, agent_id, task_type, decision_id, approved, kind, "
           "signal, comment, at, stored_at, writer, wseq, ref, record_id, key, score")

_APPEND = f"""
BEGIN TRANSACTION;
{writers.bump(PEOPLE, "1")}
CREATE type::thing('trust_feedback', $id) SET agent_id = $row.agent_id,
    task_type = $row.task_type, decision_id = $row.decision_id, approved = $row.approved,
    kind = $row.kind, signal = $row.signal, comment = $row.comment, at = $row.at,
    ref = $row.ref, record_id = $row.record_id, key = $row.key, score = $row.score,
    stored_at = time::now(), writer = $writer, wseq = $n
RETURN {_PEOPLE};
COMMIT TRANSACTION;"""
_PEOPLE_SELECT = f"SELECT {_PEOPLE} FROM trust_feedback"
_PEOPLE_ORDER = "ORDER BY stored_at, id;"
_LIFECYCLE = "agent_id, task_type, decay, decayed_at, deprecated_at, changed_at"
_LIFECYCLE_SELECT = f"SELECT {_LIFECYCLE} FROM trust_lifecycle"

# One write per pair: the embedded engine (surrealkv) keeps only the first of two writes
# to one record in a transaction once the store is reopened (a mark written after the
# pair's decay was lost), so a pair's decay and mark go in one UPSERT.
_DECAY = f"""
BEGIN TRANSACTION;
{writers.bump(LIFECYCLE, "1")}
FOR $p IN $pairs {{
    LET $fresh = $p.decay != NONE AND
        type::thing('trust_lifecycle', [$p.agent_id, $p.task_type]).decay_week != $week;
    IF $fresh OR $p.marked {{
        UPSERT type::thing('trust_lifecycle', [$p.agent_id, $p.task_type]) SET
            agent_id = $p.agent_id, task_type = $p.task_type,
            decay = IF $fresh THEN $p.decay ELSE decay ?? [0.0, 0.0, 0.0] END,
            decayed_at = IF $fresh THEN $at ELSE decayed_at END,
            deprecated_at = IF $p.marked THEN $p.at ELSE deprecated_at END,
            decay_week = IF $fresh THEN $week ELSE decay_week END,
            changed_at = time::now(), writer = $writer, wseq = $n;
    }};
}};
FOR $h IN $history {{ CREATE trust_history CONTENT $h; }};
COMMIT TRANSACTION;
"""

_RETIRE = f"""
BEGIN TRANSACTION;
{writers.bump(ARCHIVE, "1")}
LET $key = [$agent_id, $task_type];
LET $moving = (SELECT * FROM execution WHERE agent_id = $agent_id AND task_type = $task_type);
FOR $e IN $moving {{
    UPSERT type::thing('execution_archive', record::id($e.id)) CONTENT {{
        agent_id: $e.agent_id, task_type: $e.task_type, success: $e.success,
        quality: $e.quality, latency_ms: $e.latency_ms, cost: $e.cost,
        timestamp: $e.timestamp, decision_id: $e.decision_id, metadata: $e.metadata,
        seq: $e.seq, quality_given: $e.quality_given, run_ids: $e.run_ids,
        stored_at: $e.stored_at, pos: $e.pos, writer: $e.writer, wseq: $e.wseq,
        archived_at: $at
    }};
}};
LET $life = (SELECT * OMIT id FROM ONLY type::thing('trust_lifecycle', $key));
LET $said = (SELECT * OMIT id FROM trust_feedback
             WHERE agent_id = $agent_id AND task_type = $task_type);
CREATE trust_archive CONTENT {{
    agent_id: $agent_id, task_type: $task_type, trust: $life ?? {{}}, profile: $profile,
    feedback: $said, archived_at: $at, stored_at: time::now()
}};
DELETE execution WHERE agent_id = $agent_id AND task_type = $task_type;
DELETE trust_feedback WHERE agent_id = $agent_id AND task_type = $task_type;
DELETE type::thing('trust_lifecycle', $key);
CREATE trust_history CONTENT $history;
RETURN array::len($moving);  -- this retirement's, not earlier ones' in the archive
COMMIT TRANSACTION;
"""


class TrustRepository:
    """Reads and writes everything the trust layer keeps."""

    SCHEMA = SCHEMA

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        #: This repository's writer id: its counter rows and its rows' ``writer``.
        self.writer = uuid.uuid4().hex
        self._append = threading.Lock()  # one write of this writer at a time

    def _write(self, sql: str, params: dict[str, Any], rows: int = 0) -> list[Any]:
        with self._append:
            return self._conn.run(sql, {**params, "writer": self.writer}, rows=rows)

    # -- what people and signals said (a log) -------------------------------------
    def append(self, row: dict[str, Any], row_id: str | None = None
               ) -> tuple[dict[str, Any], bool]:
        """Append one feedback, review or signal row at once under ``row_id`` (the
        client's id; a new one when None); returns it as stored (with its id,
        ``stored_at``, ``writer`` and ``wseq``) and whether this call stored it (False:
        the id was stored already, by an earlier try whose answer was lost or by another
        client)."""
        key = row_id or str(uuid.uuid4())
        try:
            return dict(self._write(_APPEND, {"id": key, "row": row})[1][0]), True
        except QueryFailed:  # sent again after a lost answer: is the row stored?
            found = self.get(key)
            if found is not None:
                return found, False
            raise

    def get(self, row_id: str) -> dict[str, Any] | None:
        """One stored row of ``trust_feedback`` by id, or None."""
        found = self._conn.run(f"SELECT {_PEOPLE} FROM type::thing('trust_feedback', $id);",
                               {"id": row_id})[0]
        return dict(found[0]) if found else None

    def has_verdicts(self) -> bool:
        """Whether any feedback on an execution (a verdict with a key) is stored."""
        rows = self._conn.run("SELECT id FROM trust_feedback WHERE key != NONE LIMIT 1;")[0]
        return bool(rows)

    def people(self) -> list[dict[str, Any]]:
        """Every row of ``trust_feedback``, in log order."""
        return list(self._conn.run(f"{_PEOPLE_SELECT} {_PEOPLE_ORDER}")[0])

    def lifecycle(self) -> list[dict[str, Any]]:
        """The lifecycle job's marks per pair."""
        return list(self._conn.run(f"{_LIFECYCLE_SELECT};")[0])

    def counters(self) -> dict[str, dict[str, int]]:
        """Every writer's counter per log table (``profiles.store.writers.counters``)."""
        return writers.counters(self._conn)

    def people_written(self, writer: str, after: int, upto: int
                       ) -> Iterator[list[dict[str, Any]]]:
        """People's rows ``writer`` appended with ``after < wseq <= upto``, paged."""
        yield from writers.written(self._conn, PEOPLE, _PEOPLE, writer, after, upto)

    def marks_written(self, writer: str, after: int, upto: int
                      ) -> Iterator[list[dict[str, Any]]]:
        """Lifecycle marks last changed by ``writer``'s runs numbered ``after < wseq <=
        upto`` (a mark changed again later carries the later run's number), paged."""
        yield from writers.written(self._conn, LIFECYCLE, _LIFECYCLE, writer, after, upto)

    def append_history(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append confidence-history rows (derived: written after the fact, in a batch)."""
        if rows := list(rows):
            self._conn.run("FOR $h IN $rows { CREATE trust_history CONTENT $h; };",
                           {"rows": rows})

    # -- lifecycle -------------------------------------------------------------------
    def week_applied(self, week: str) -> dict[str, Any] | None:
        """The decay run recorded for ``week``, if any."""
        rows = self._conn.run("SELECT * FROM ONLY type::thing('trust_run', $w);", {"w": week})
        return rows[0] if rows and rows[0] else None

    def last_run_at(self) -> datetime | None:
        """The moment the latest decay run was made as of (None before the first)."""
        rows = self._conn.run("SELECT at FROM trust_run ORDER BY at DESC LIMIT 1;")[0]
        return rows[0]["at"] if rows else None

    def decay(self, week: str, at: datetime, changes: Iterable[dict[str, Any]],
              marks: Iterable[dict[str, Any]], history: Iterable[dict[str, Any]]) -> None:
        """Set the decay offsets of the pairs in ``changes`` (``decay``: their new
        offsets; once per pair per week), set or lift deprecation marks, log history."""
        pairs: dict[tuple[str, str], dict[str, Any]] = {}
        for c in changes:
            pairs[c["agent_id"], c["task_type"]] = {
                "agent_id": c["agent_id"], "task_type": c["task_type"], "decay": c["decay"],
                "marked": False, "at": None}
        for m in marks:
            pair = pairs.setdefault((m["agent_id"], m["task_type"]), {
                "agent_id": m["agent_id"], "task_type": m["task_type"], "decay": None})
            pair.update(marked=True, at=m["at"])
        self._write(_DECAY, {"week": week, "at": at, "pairs": list(pairs.values()),
                             "history": list(history)})

    def record_run(self, week: str, decayed: int, deprecated: int, deleted: int,
                   at: datetime) -> None:
        """Remember that the decay job ran for ``week`` (its idempotency key)."""
        self._conn.run("UPSERT type::thing('trust_run', $w) CONTENT {week: $w, decayed: $a, "
                       "deprecated: $b, deleted: $c, at: $at};",
                       {"w": week, "a": decayed, "b": deprecated, "c": deleted, "at": at})

    def retire(self, agent_id: str, task_type: str, history: dict[str, Any],
               at: datetime, profile: dict[str, Any] | None = None) -> int:
        """Archive a pair's executions, feedback, lifecycle marks and last ``profile``,
        then delete them; returns the number of archived executions of the pair."""
        pair = {"agent_id": agent_id, "task_type": task_type}
        moved = self._conn.run("SELECT count() AS n FROM execution WHERE agent_id = "
                               "$agent_id AND task_type = $task_type GROUP ALL;", pair)[0]
        rows = self._write(_RETIRE, {**pair, "history": history, "at": at, "profile": profile},
                           rows=int(moved[0]["n"]) if moved else 0)  # its deadline grows
        found = [r for r in rows if isinstance(r, int)]
        return int(found[-1]) if found else 0

    # -- reading ---------------------------------------------------------------------
    def history(self, agent_id: str, task_type: str, limit: int = 1000) -> list[dict[str, Any]]:
        """A pair's confidence history, oldest first."""
        return list(self._conn.run(
            "SELECT * OMIT id FROM trust_history WHERE agent_id = $a AND task_type = $t "
            "ORDER BY at LIMIT $n;", {"a": agent_id, "t": task_type, "n": limit})[0])

    def feedback(self, agent_id: str, task_type: str) -> list[dict[str, Any]]:
        """Feedback and reviews on a pair, oldest first."""
        return list(self._conn.run(
            "SELECT * OMIT id FROM trust_feedback WHERE agent_id = $a AND task_type = $t "
            "ORDER BY at;", {"a": agent_id, "t": task_type})[0])

    def archived_executions(self, agent_id: str, task_type: str) -> list[dict[str, Any]]:
        """Executions of a retired pair, in clock order."""
        return list(self._conn.run(
            "SELECT *, record::id(id) AS record_id OMIT id FROM execution_archive "
            "WHERE agent_id = $a AND task_type = $t ORDER BY seq;",
            {"a": agent_id, "t": task_type})[0])


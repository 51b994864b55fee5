"""The execution log: the SurrealQL behind ``record()``, following and rebuilding.

Executions are appended, never updated: under the client-generated ``record_id``, in one
transaction per write (one record, or one ``INSERT`` for a batch) that also bumps the
writing repository's own counter (``profiles.store.writers``) and stamps each row with
``writer`` and ``wseq``. Writers in any number of processes never touch the same row.
Profiles, trust counts and the evidence order are projections that every router folds
from this table (``trustroute.profiles.book``), so no number depends on concurrent
increments.

Each row gets ``stored_at = time::now()`` from the database and its ``pos`` in its
write. ``(stored_at, pos, record_id)`` is the row's place in the log (``LogKey``): one
order for every router, the order a router folds the log in when it rebuilds. Stamps
only order the log; they never decide what a router has seen: rows stored by other
processes are found by writer and ``wseq`` (``written``), against the writers' counters.

Why not SurrealDB change feeds: measured with the pinned SDK's engine behind the test
server, 4 processes x 500 concurrent single-row commits left 2,000 rows but only 1,881
entries in ``SHOW CHANGES`` (concurrent commits shared a versionstamp and overwrote
each other's entry), and a reader following the feed missed 3 of those it did hold
(they became visible behind its cursor). docs/storage.md has the details.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from surrealdb import RecordID

from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import writers
from trustroute.profiles.store.connection import Connection, QueryFailed

SCHEMA = """
DEFINE TABLE IF NOT EXISTS execution SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON execution TYPE string
    ASSERT string::len($value) IN 1..=256;
DEFINE FIELD IF NOT EXISTS task_type ON execution TYPE string
    ASSERT string::len($value) IN 1..=256;
DEFINE FIELD IF NOT EXISTS success ON execution TYPE bool;
DEFINE FIELD IF NOT EXISTS quality ON execution TYPE float ASSERT $value >= 0 AND $value <= 1;
DEFINE FIELD IF NOT EXISTS latency_ms ON execution TYPE float ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS cost ON execution TYPE option<float> ASSERT $value = NONE OR $value >= 0;
DEFINE FIELD IF NOT EXISTS timestamp ON execution TYPE datetime;
DEFINE FIELD IF NOT EXISTS decision_id ON execution TYPE option<string>;
DEFINE FIELD IF NOT EXISTS metadata ON execution FLEXIBLE TYPE object;
-- False when the caller gave no quality (it was filled in from success): with a
-- feedback policy's wait_s the run awaits a verdict. Absent on older rows: given.
DEFINE FIELD IF NOT EXISTS quality_given ON execution TYPE option<bool>;
-- LangChain run ids of the execution (the routed run, the chosen agent's run): a
-- feedback ref may be any of them.
DEFINE FIELD IF NOT EXISTS run_ids ON execution TYPE option<array<string>>;
-- Where the row sits in the log: the database's clock when it was written, and its
-- position in its write (a batch is one write). Rows of stores written before the log
-- design have neither; they sort first, by timestamp.
DEFINE FIELD IF NOT EXISTS stored_at ON execution TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS pos ON execution TYPE option<int>;
-- The per-task-type clock of stores written before the log design (read, no longer
-- written: the evidence order is now derived from the log).
DEFINE FIELD IF NOT EXISTS seq ON execution TYPE option<int>;
-- Who appended the row and its number among that writer's rows (profiles.store.writers);
-- rows of stores written before schema version 3 have neither.
DEFINE FIELD IF NOT EXISTS writer ON execution TYPE option<string>;
DEFINE FIELD IF NOT EXISTS wseq ON execution TYPE option<int>;
DEFINE INDEX IF NOT EXISTS execution_writer ON execution FIELDS writer, wseq;
DEFINE INDEX IF NOT EXISTS execution_pair ON execution FIELDS agent_id, task_type;
DEFINE INDEX IF NOT EXISTS execution_decision ON execution FIELDS decision_id;
DEFINE INDEX IF NOT EXISTS execution_run_ids ON execution FIELDS run_ids;
""" + writers.SCHEMA

_COLUMNS = ("record::id(id) AS record_id, agent_id, task_type, success, quality, "
            "latency_ms, cost, timestamp, decision_id, metadata, stored_at, pos, seq, "
            "writer, wseq, quality_given, run_ids")

# An id a retirement archived (decay moves a retired pair's rows to execution_archive,
# keeping their ids) counts as stored: writing it again would bring the pair back. One
# key lookup per row; the write then fails, changing nothing, as for a stored id.
_NOT_ARCHIVED_ONE = ("IF record::exists(type::thing('execution_archive', $r.record_id)) "
                     "{ THROW 'record_id is archived'; };")
_NOT_ARCHIVED_MANY = ("IF array::len((SELECT VALUE id FROM $archived)) > 0 "
                      "{ THROW 'a record_id of the batch is archived'; };")

# One record: one transaction of the counter's bump and a CREATE, which fails (changing
# nothing, the counter included) when the id is stored or archived.
RECORD_ONE = f"""
BEGIN TRANSACTION;
{_NOT_ARCHIVED_ONE}
{writers.bump("execution", "1")}
CREATE type::thing('execution', $r.record_id) CONTENT {{
    agent_id: $r.agent_id, task_type: $r.task_type, success: $r.success,
    quality: $r.quality, latency_ms: $r.latency_ms, cost: $r.cost,
    timestamp: $r.timestamp, decision_id: $r.decision_id, metadata: $r.metadata ?? {{}},
    quality_given: $r.quality_given, run_ids: $r.run_ids,
    stored_at: time::now(), pos: 0, writer: $writer, wseq: $n
}} RETURN stored_at, wseq;
COMMIT TRANSACTION;"""

# A batch: the bump and one INSERT, all or nothing; it fails when any id is stored. The
# first number is computed once: the engine copies $rows wherever a row's expression
# names it, so `array::len($rows)` per row made a batch of 2,000 rows take 12 s, not 0.3.
RECORD_BATCH = f"""
BEGIN TRANSACTION;
{_NOT_ARCHIVED_MANY}
{writers.bump("execution", "array::len($rows)")}
LET $first = $n - array::len($rows) + 1;
INSERT INTO execution (
    SELECT type::thing('execution', record_id) AS id, agent_id, task_type,
        success, quality, latency_ms, cost, timestamp, decision_id,
        metadata ?? {{}} AS metadata, quality_given, run_ids, time::now() AS stored_at, pos,
        $writer AS writer, $first + pos AS wseq
    FROM $rows
) RETURN stored_at, wseq;
COMMIT TRANSACTION;"""

STORED = f"SELECT {_COLUMNS} FROM $ids;"
ARCHIVED = "SELECT VALUE record::id(id) FROM $ids;"
WRITTEN = 2  # the statement of RECORD_ONE that returns the row
WRITTEN_MANY = 3  # the statement of RECORD_BATCH that returns the rows


class Origin(NamedTuple):
    """Who appended a row and its number among that writer's rows of its table."""

    writer: str
    wseq: int


class LogKey(NamedTuple):
    """A row's place in the log: one order for every router (older stores' rows, with
    no ``stored_at``, sort first by their own timestamp and seq)."""

    stored_at: float  # POSIX seconds of the database's clock at the write
    pos: int  # position in its write
    record_id: str


class LogRow(NamedTuple):
    """An execution read back from the log, with its place in it and its origin (None
    for rows of stores written before schema version 3)."""

    record: ExecutionRecord
    key: LogKey
    origin: Origin | None = None


def origin_of(row: dict[str, Any]) -> Origin | None:
    """A stored row's writer and ``wseq``, when it has them."""
    writer, wseq = row.get("writer"), row.get("wseq")
    return None if writer is None or wseq is None else Origin(writer, int(wseq))


def row_params(record: ExecutionRecord, pos: int = 0) -> dict[str, Any]:
    """An execution's columns as bound parameters (absent optional columns left out)."""
    row: dict[str, Any] = {
        "record_id": record.record_id, "agent_id": record.agent_id,
        "task_type": record.task_type, "success": record.success,
        "quality": record.effective_quality, "latency_ms": record.latency_ms,
        "timestamp": record.timestamp, "pos": pos,
    }
    if record.cost is not None:
        row["cost"] = record.cost
    if record.decision_id is not None:
        row["decision_id"] = record.decision_id
    if record.metadata:
        row["metadata"] = record.metadata
    if not record.quality_given:
        row["quality_given"] = False
    if record.run_ids:
        row["run_ids"] = list(record.run_ids)
    return row


def log_row(row: dict[str, Any]) -> LogRow:
    """A stored row (``_COLUMNS``) as a record and its log key (not validated again: the
    schema checked it when it was written, and rows written under older, looser limits
    must still load)."""
    record = ExecutionRecord.model_construct(
        record_id=row["record_id"], agent_id=row["agent_id"], task_type=row["task_type"],
        success=row["success"], quality=row["quality"], latency_ms=row["latency_ms"],
        cost=row.get("cost"), timestamp=row["timestamp"],
        decision_id=row.get("decision_id"), metadata=row.get("metadata") or {},
        run_ids=tuple(row.get("run_ids") or ()))
    if row.get("quality_given") is False:
        record.without_quality()
    if row.get("stored_at") is None:  # written before the log design: before every new row
        return LogRow(record, LogKey(float("-inf"), int(row.get("seq") or 0),
                                     f"{record.timestamp.isoformat()} {record.record_id}"))
    return LogRow(record, LogKey(row["stored_at"].timestamp(), int(row.get("pos") or 0),
                                 record.record_id), origin_of(row))


class ExecutionRepository:
    """Appends executions (as one writer) and reads the log back."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        #: This repository's writer id: its counter row and its rows' ``writer``.
        self.writer = uuid.uuid4().hex
        self._append = threading.Lock()  # one write of this writer at a time

    def record(self, record: ExecutionRecord) -> LogRow | None:
        """Append one execution; it as stored (key, origin), or None when its id is
        already stored."""
        try:
            with self._append:
                stored = self._conn.run(RECORD_ONE, {"r": row_params(record),
                                                     "writer": self.writer})[WRITTEN][0]
        except QueryFailed:
            if self.stored_ids([record.record_id]):
                return None
            raise
        return LogRow(record, LogKey(stored["stored_at"].timestamp(), 0, record.record_id),
                      Origin(self.writer, int(stored["wseq"])))

    def record_many(self, records: Sequence[ExecutionRecord]) -> list[LogRow | None]:
        """Append a batch in one write; per record it as stored, or None when its id is
        already stored or repeats an earlier record of the batch.

        The write is all or nothing: when an id turns out to be stored already, the
        stored ids are looked up, dropped, and the rest is written again. Each retry
        drops at least one record, so this ends. A single record is one ``CREATE``.
        """
        if len(records) == 1:
            return [self.record(records[0])]
        out: list[LogRow | None] = [None] * len(records)
        first: dict[str, int] = {}
        for index, record in enumerate(records):
            first.setdefault(record.record_id, index)
        todo = list(first.values())
        while todo:
            try:
                with self._append:
                    stamps = self._conn.run(RECORD_BATCH, {
                        "writer": self.writer,
                        "rows": [row_params(records[i], pos) for pos, i in enumerate(todo)],
                        "archived": [RecordID("execution_archive", records[i].record_id)
                                     for i in todo]})[WRITTEN_MANY]
            except QueryFailed:
                stored = self.stored_ids([records[i].record_id for i in todo])
                if not stored:
                    raise
                todo = [i for i in todo if records[i].record_id not in stored]
                continue
            for pos, (i, stamp) in enumerate(zip(todo, stamps, strict=True)):
                out[i] = LogRow(records[i], LogKey(stamp["stored_at"].timestamp(), pos,
                                                   records[i].record_id),
                                Origin(self.writer, int(stamp["wseq"])))
            break
        return out

    def stored(self, record_ids: Sequence[str]) -> dict[str, LogRow]:
        """The stored rows among ``record_ids``, by id."""
        rows = self._conn.run(STORED, {"ids": [RecordID("execution", r) for r in record_ids]})
        return {row["record_id"]: log_row(row) for row in rows[0] if row}

    def find(self, ref: str) -> LogRow | None:
        """The execution ``ref`` names: its record id, its decision id (the first stored,
        when a decision was recorded twice) or one of its run ids (the last stored: a
        routed run's id is on each of its attempts, and the last one's answer, or error,
        is what the caller got)."""
        rows = self._conn.run(
            f"SELECT {_COLUMNS} FROM $rid; "
            f"SELECT {_COLUMNS} FROM execution WHERE decision_id = $ref "
            "ORDER BY stored_at LIMIT 1; "
            f"SELECT {_COLUMNS} FROM execution WHERE run_ids CONTAINS $ref "
            "ORDER BY stored_at DESC, pos DESC LIMIT 1;",
            {"rid": RecordID("execution", ref), "ref": ref})
        found = next((page[0] for page in rows if page and page[0]), None)
        return None if found is None else log_row(found)

    def stored_ids(self, record_ids: Sequence[str]) -> set[str]:
        """Which of ``record_ids`` are stored: in the log, or archived by a retirement
        (neither can be written again; also for checking what a crash kept)."""
        if not record_ids:
            return set()
        archived = self._conn.run(ARCHIVED, {
            "ids": [RecordID("execution_archive", r) for r in record_ids]})[0]
        return set(self.stored(record_ids)) | set(archived)

    def counters(self) -> dict[str, dict[str, int]]:
        """Every writer's counter per log table (``profiles.store.writers.counters``)."""
        return writers.counters(self._conn)

    def written(self, writer: str, after: int, upto: int, batch: int = 5000
                ) -> Iterator[list[LogRow]]:
        """The rows ``writer`` appended with ``after < wseq <= upto`` (a router fetches
        exactly the range its counter shows it lacks), a page at a time."""
        for page in writers.written(self._conn, "execution", _COLUMNS, writer, after, upto,
                                    batch):
            yield [log_row(row) for row in page]

    def scan(self, batch: int = 5000) -> list[LogRow]:
        """The whole log in log order (what a router rebuilds from).

        Paged by offset in the table's own order: a key range (``WHERE id > $last
        ORDER BY id``) re-sorts the table at every page and was six times slower on
        100,000 rows. A row written meanwhile can shift a page and come twice; the id
        keeps it once (a row deleted meanwhile retires its pair, and that rebuilds)."""
        rows: dict[str, LogRow] = {}
        for page in self._conn.pages(f"SELECT {_COLUMNS} FROM execution", {}, batch):
            rows.update((row["record_id"], log_row(row)) for row in page)
        return sorted(rows.values(), key=lambda r: r.key)

    def count(self) -> int:
        """Number of stored executions."""
        rows = self._conn.run("SELECT count() AS n FROM execution GROUP ALL;")
        return int(rows[0][0]["n"]) if rows[0] else 0

    def iter_executions(self, *, agent_id: str | None = None, task_type: str | None = None,
                        since: datetime | None = None, batch: int = 1000
                        ) -> Iterator[dict[str, Any]]:
        """Stored executions, oldest first, optionally filtered; paged.

        Each row has the execution's columns plus ``record_id`` (the client id).
        """
        params = {name: value for name, value in
                  (("agent_id", agent_id), ("task_type", task_type), ("since", since))
                  if value is not None}
        clauses = ["timestamp >= $since" if name == "since" else f"{name} = ${name}"
                   for name in params]
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        for page in self._conn.pages(f"SELECT *, record::id(id) AS record_id FROM execution{where}"
                                " ORDER BY timestamp, stored_at, pos, id", params, batch):
            yield from page

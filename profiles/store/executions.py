"""Executions and profile aggregates: the SurrealQL behind ``record()`` and loading.

One ``record()`` is one transaction: create the execution under its client-generated id
and update the profile aggregate with server-side increments (``SET n += 1``), never a
read-modify-write from Python, so routers in several processes against one server stay
consistent. A record id that already exists makes the write a no-op (idempotent retry).
The per-task-type clock ``task_clock`` numbers executions so strategies can age evidence
by count as well as by time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from profiles.profile import ProfileState
from profiles.records import ExecutionRecord
from profiles.store.connection import Connection, QueryFailed
from profiles.store.execution_batch import plan_batch, record_params
from profiles.store.window_format import parse_window, window_params

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
DEFINE FIELD IF NOT EXISTS seq ON execution TYPE int ASSERT $value >= 1;
-- Per-pair reads (retiring a profile, replays of one agent) use this index. There is
-- deliberately no index on decision_id: nothing looks executions up by it, and each
-- index costs every write (decisions live in their own table, keyed by decision id).
DEFINE INDEX IF NOT EXISTS execution_pair ON execution FIELDS agent_id, task_type;

DEFINE TABLE IF NOT EXISTS task_clock SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS n ON task_clock TYPE int ASSERT $value >= 0;

DEFINE TABLE IF NOT EXISTS profile SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON profile TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON profile TYPE string;
DEFINE FIELD IF NOT EXISTS executions_total ON profile TYPE int ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS executions_successful ON profile TYPE int
    ASSERT $value >= 0 AND $value <= executions_total;
DEFINE FIELD IF NOT EXISTS quality_sum ON profile TYPE float ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS latency_sum_ms ON profile TYPE float ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS cost_sum ON profile TYPE float ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS cost_count ON profile TYPE int ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS last_updated ON profile TYPE datetime;
-- The recency window, oldest first: ';'-separated entries "POSIX-seconds quality
-- success(0/1) seq" (window_format.py), trimmed to the window size by the statement
-- that appends. Text on
-- the profile row, because in this engine a typed array field costs milliseconds per
-- update and a row per entry doubles every write and makes opening a store scan them
-- all; a string is one value to write, read and decode.
DEFINE FIELD IF NOT EXISTS recent ON profile TYPE string;
"""

# Append $new (one or more ';'-joined entries) to the window text. Trimming to the last
# $w entries costs a split and a join, so it runs only once the text is longer than
# $trim_at characters (see window_params); between trims an append is a
# plain concatenation. Loading keeps the last $w entries either way.
_APPEND_WINDOW = """IF string::len(recent ?? '') > $trim_at
            THEN array::join(array::slice(string::split(
                (IF recent THEN recent + ';' ELSE '' END) + {new}, ';'), -$w), ';')
            ELSE (IF recent THEN recent + ';' ELSE '' END) + {new} END"""

# One record, one transaction ($r: see execution_batch.record_params); returns its seq.
# An id that is already stored makes the CREATE, and so the whole transaction, fail:
# the caller then checks whether the id is stored (an idempotent retry) or re-raises.
RECORD_ONE = """
BEGIN TRANSACTION;
LET $seq = (UPSERT type::thing('task_clock', [$r.task_type]) SET n += 1 RETURN VALUE n)[0];
CREATE type::thing('execution', $r.record_id) CONTENT {
    agent_id: $r.agent_id, task_type: $r.task_type, success: $r.success,
    quality: $r.quality, latency_ms: $r.latency_ms, cost: $r.cost,
    timestamp: $r.timestamp, decision_id: $r.decision_id, metadata: $r.metadata,
    seq: $seq
} RETURN NONE;
UPSERT type::thing('profile', [$r.agent_id, $r.task_type]) SET
    agent_id = $r.agent_id, task_type = $r.task_type,
    executions_total += 1,
    executions_successful += $r.successes,
    quality_sum += $r.quality,
    latency_sum_ms += $r.latency_ms,
    cost_sum += $r.cost_sum,
    cost_count += $r.cost_count,
    last_updated = IF last_updated = NONE OR $r.timestamp > last_updated
        THEN $r.timestamp ELSE last_updated END,
    recent = """ + _APPEND_WINDOW.format(new="$r.entry + ' ' + <string> $seq") + """
RETURN NONE;
RETURN $seq;
COMMIT TRANSACTION;
"""

# A batch, one transaction ($rows, $tasks, $pairs, $w: see execution_batch.py).
# The INSERT fails, and with it the whole transaction, when an id is already stored:
# the caller then asks which (STORED_IDS), drops them and writes the rest. Otherwise
# each task clock's value before the batch is returned; a record's seq is that value
# plus its ordinal in the batch. Closures cannot read LET variables, hence SELECT and FOR.
RECORD_BATCH = """
BEGIN TRANSACTION;
LET $bases = array::map($tasks, |$t|
    (UPSERT type::thing('task_clock', [$t.task_type]) SET n += $t.count
     RETURN VALUE n)[0] - $t.count);
INSERT INTO execution (
    SELECT type::thing('execution', record_id) AS id, agent_id, task_type,
        success, quality, latency_ms, cost, timestamp, decision_id,
        metadata ?? {} AS metadata, $bases[task] + ordinal AS seq
    FROM $rows
) RETURN NONE;
FOR $p IN $pairs {
    LET $base = $bases[$p.task];
    LET $entries = array::join(
        (SELECT VALUE entry + ' ' + <string> ($base + ordinal) FROM $p.window), ';');
    UPSERT type::thing('profile', [$p.agent_id, $p.task_type]) SET
        agent_id = $p.agent_id, task_type = $p.task_type,
        executions_total += $p.executions,
        executions_successful += $p.successes,
        quality_sum += $p.quality_sum,
        latency_sum_ms += $p.latency_sum_ms,
        cost_sum += $p.cost_sum,
        cost_count += $p.cost_count,
        last_updated = IF last_updated = NONE OR $p.last_updated > last_updated
            THEN $p.last_updated ELSE last_updated END,
        recent = """ + _APPEND_WINDOW.format(new="$entries") + """
    RETURN NONE;
};
RETURN $bases;
COMMIT TRANSACTION;
"""

STORED_IDS = "RETURN array::filter($ids, |$id| record::exists(type::thing('execution', $id)));"

LOAD = """
SELECT VALUE [agent_id, task_type, executions_total, executions_successful, quality_sum,
              latency_sum_ms, cost_sum, cost_count, last_updated, recent] FROM profile;
SELECT VALUE [record::id(id)[0], n] FROM task_clock;
"""


class ExecutionRepository:
    """Writes executions and reads profile aggregates."""

    def __init__(self, conn: Connection, window_size: int = 100) -> None:
        self._conn = conn
        self.window_size = window_size
        self._window_params = window_params(window_size)

    def record(self, record: ExecutionRecord) -> int | None:
        """Write one execution; returns its seq, or None if its id was already stored."""
        try:
            rows = self._conn.run(RECORD_ONE,
                                  {"r": record_params(record), **self._window_params})
        except QueryFailed:
            if self.stored_ids([record.record_id]):
                return None
            raise
        return int(rows[-1])

    def record_many(self, records: Sequence[ExecutionRecord]) -> list[int | None]:
        """Write a batch in one transaction; per record its seq, or None when its id is
        already stored or repeats an earlier record of the batch.

        The transaction is all or nothing: if an id turns out to be stored already it
        writes nothing, the stored ids are looked up, dropped, and the rest is written
        again. Each retry drops at least one record, so this ends.
        """
        seqs: list[int | None] = [None] * len(records)
        plan = plan_batch(records, self.window_size)
        while plan.records:
            try:
                bases = self._conn.run(RECORD_BATCH, plan.params())[-1]
            except QueryFailed:
                stored = self.stored_ids(plan.record_ids)
                if not stored:
                    raise
                plan = plan.without(stored)
                continue
            for position, seq in zip(plan.positions, plan.seqs(bases), strict=True):
                seqs[position] = seq
            break
        return seqs

    def load(self) -> tuple[list[ProfileState], dict[str, int]]:
        """Every profile aggregate and task clock, for rebuilding the in-memory book."""
        profiles, clocks = self._conn.run(LOAD)
        states = [
            ProfileState(
                agent_id=agent_id, task_type=task_type, window_size=self.window_size,
                executions_total=int(total), executions_successful=int(successful),
                quality_sum=float(quality_sum), latency_sum_ms=float(latency_sum_ms),
                cost_sum=float(cost_sum), cost_count=int(cost_count),
                last_updated=last_updated,
                window=deque(parse_window(recent), maxlen=self.window_size),
            )
            for (agent_id, task_type, total, successful, quality_sum, latency_sum_ms,
                 cost_sum, cost_count, last_updated, recent) in profiles
        ]
        return states, {task_type: int(n) for task_type, n in clocks}

    def stored_ids(self, record_ids: Sequence[str]) -> set[str]:
        """Which of ``record_ids`` are stored (for checking what a crash kept)."""
        return set(self._conn.run(STORED_IDS, {"ids": list(record_ids)})[-1])

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
        clauses: list[str] = []
        params: dict[str, Any] = {}
        for name, value in (("agent_id", agent_id), ("task_type", task_type)):
            if value is not None:
                clauses.append(f"{name} = ${name}")
                params[name] = value
        if since is not None:
            clauses.append("timestamp >= $since")
            params["since"] = since
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        start = 0
        while True:
            page = self._conn.run(
                f"SELECT *, record::id(id) AS record_id FROM execution{where}"
                " ORDER BY timestamp, seq, id LIMIT $lim START $start;",
                {**params, "lim": batch, "start": start},
            )[0]
            yield from page
            if len(page) < batch:
                return
            start += batch

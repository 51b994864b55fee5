"""Executions and profile aggregates: the SurrealQL behind ``record()`` and loading.

One ``record()`` is one transaction: create the execution under its client-generated id
and update the profile aggregate with server-side increments (``SET n += 1``), never a
read-modify-write from Python, so routers in several processes against one server stay
consistent. A record id that already exists makes the write a no-op (idempotent retry).

Each execution also gets a ``seq``: its place in its task type's execution clock, which
strategies use to age evidence by count as well as by time. The repository numbers them
itself, under its write lock, from clocks it loads with the profiles (the highest of the
type's summed ``executions_total`` and the newest seq in its windows). Embedded, one
process owns the store (path lock), so seqs are exact and gapless. Against a server,
each router numbers its own writes from its last load, so two processes may give the
same seq to different executions until they ``refresh()``; the aggregates, written with
server-side increments, stay exact. A clock row updated inside every write would make
seqs global, but it was a third statement in the transaction and cost about 45 us of a
~550 us write (docs/storage.md has the measurements).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from trustroute.profiles.profile import ProfileState
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store.connection import Connection, QueryFailed
from trustroute.profiles.store.execution_batch import plan_batch, record_params
from trustroute.profiles.store.window_format import parse_window

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
-- success(0/1) seq" (window_format.py), trimmed to the window size by every write. Text,
-- because in this engine a typed array field costs milliseconds per update and a row per
-- entry doubles every write and makes opening a store scan them all.
DEFINE FIELD IF NOT EXISTS recent ON profile TYPE string;

-- Stores written before 2026-11-23 kept the older part of each window here; it is still
-- read (joined before the profile's own entries) but no longer written.
DEFINE TABLE IF NOT EXISTS profile_window SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS recent ON profile_window TYPE string;
"""

# The profile aggregate's server-side increments; {p} is the bound object holding them.
_AGGREGATES = """
    agent_id = {p}.agent_id, task_type = {p}.task_type,
    executions_total += {executions},
    executions_successful += {p}.successes,
    quality_sum += {p}.{quality},
    latency_sum_ms += {p}.{latency},
    cost_sum += {p}.cost_sum,
    cost_count += {p}.cost_count,
    last_updated = IF last_updated = NONE OR {p}.{at} > last_updated
        THEN {p}.{at} ELSE last_updated END"""

# A pair's window text with {new} (entries, each starting with ';') appended, trimmed to
# its last $w entries.
_WINDOW = "recent = array::join(array::slice(string::split((recent ?? '') + {new}, ';'), -$w), ';')"

_CREATE_ONE = """
CREATE type::thing('execution', $r.record_id) CONTENT {
    agent_id: $r.agent_id, task_type: $r.task_type, success: $r.success,
    quality: $r.quality, latency_ms: $r.latency_ms, cost: $r.cost,
    timestamp: $r.timestamp, decision_id: $r.decision_id, metadata: $r.metadata ?? {},
    seq: $r.seq
} RETURN NONE;"""
_ONE_AGGREGATES = _AGGREGATES.format(p="$r", executions="1", quality="quality",
                                     latency="latency_ms", at="timestamp")

# One record, one transaction ($r: see execution_batch.record_params). An id that is
# already stored makes the CREATE, and so the whole transaction, fail: the caller then
# checks whether the id is stored (an idempotent retry) or re-raises.
RECORD_ONE = ("BEGIN TRANSACTION;" + _CREATE_ONE
              + "\nUPSERT type::thing('profile', [$r.agent_id, $r.task_type]) SET"
              + _ONE_AGGREGATES + ",\n    " + _WINDOW.format(new="$r.entry")
              + " RETURN NONE;\nCOMMIT TRANSACTION;")

# A batch, one transaction ($rows, $pairs: see execution_batch.py). The INSERT fails, and
# with it the whole transaction, when an id is already stored: the caller then asks
# which (STORED_IDS), drops them and writes the rest.
RECORD_BATCH = """
BEGIN TRANSACTION;
INSERT INTO execution (
    SELECT type::thing('execution', record_id) AS id, agent_id, task_type,
        success, quality, latency_ms, cost, timestamp, decision_id,
        metadata ?? {} AS metadata, seq
    FROM $rows
) RETURN NONE;
FOR $p IN $pairs {
    UPSERT type::thing('profile', [$p.agent_id, $p.task_type]) SET"""\
    + _AGGREGATES.format(p="$p", executions="$p.executions", quality="quality_sum",
                         latency="latency_sum_ms", at="last_updated") + """,
        """ + _WINDOW.format(new="$p.entries") + """ RETURN NONE;
};
COMMIT TRANSACTION;
"""

STORED_IDS = "RETURN array::filter($ids, |$id| record::exists(type::thing('execution', $id)));"

LOAD = """
SELECT VALUE [agent_id, task_type, executions_total, executions_successful, quality_sum,
              latency_sum_ms, cost_sum, cost_count, last_updated, recent] FROM profile;
SELECT VALUE [record::id(id), recent] FROM profile_window;
"""


class ExecutionRepository:
    """Writes executions (numbering them per task type) and reads profile aggregates."""

    def __init__(self, conn: Connection, window_size: int = 100) -> None:
        self._conn = conn
        self.window_size = window_size
        self._clocks: dict[str, int] = {}  # task type -> seq of its last written execution
        self._write_lock = threading.Lock()  # a seq is taken and committed atomically

    def record(self, record: ExecutionRecord) -> int | None:
        """Write one execution; returns its seq, or None if its id was already stored."""
        with self._write_lock:
            seq = self._clocks.get(record.task_type, 0) + 1
            try:
                self._conn.run(RECORD_ONE, {"r": record_params(record, seq),
                                            "w": self.window_size})
            except QueryFailed:
                if self.stored_ids([record.record_id]):
                    return None
                raise
            self._clocks[record.task_type] = seq
            return seq

    def record_many(self, records: Sequence[ExecutionRecord]) -> list[int | None]:
        """Write a batch in one transaction; per record its seq, or None when its id is
        already stored or repeats an earlier record of the batch.

        The transaction is all or nothing: if an id turns out to be stored already it
        writes nothing, the stored ids are looked up, dropped, and the rest is written
        again. Each retry drops at least one record, so this ends.
        """
        seqs: list[int | None] = [None] * len(records)
        with self._write_lock:
            plan = plan_batch(records, self.window_size)
            while plan.records:
                bases = [self._clocks.get(t, 0) for t in plan.task_types]
                try:
                    self._conn.run(RECORD_BATCH, plan.params(bases))
                except QueryFailed:
                    stored = self.stored_ids(plan.record_ids)
                    if not stored:
                        raise
                    plan = plan.without(stored)
                    continue
                for position, seq in zip(plan.positions, plan.seqs(bases), strict=True):
                    seqs[position] = seq
                for task_type, base, count in zip(plan.task_types, bases, plan.task_counts,
                                                  strict=True):
                    self._clocks[task_type] = base + count
                break
        return seqs

    def load(self) -> tuple[list[ProfileState], dict[str, int]]:
        """Every profile aggregate, and each task type's clock, for rebuilding the
        in-memory book; the clocks also become the ones new writes count from."""
        profiles, sealed_rows = self._conn.run(LOAD)
        sealed = {(key[0], key[1]): text for key, text in sealed_rows}
        states: list[ProfileState] = []
        for (agent_id, task_type, total, successful, quality_sum, latency_sum_ms,
             cost_sum, cost_count, last_updated, recent) in profiles:
            older = parse_window(sealed.get((agent_id, task_type)))
            states.append(ProfileState(
                agent_id=agent_id, task_type=task_type, window_size=self.window_size,
                executions_total=int(total), executions_successful=int(successful),
                quality_sum=float(quality_sum), latency_sum_ms=float(latency_sum_ms),
                cost_sum=float(cost_sum), cost_count=int(cost_count),
                last_updated=last_updated,
                window=deque(older + parse_window(recent), maxlen=self.window_size),
            ))
        executed: dict[str, int] = {}
        newest: dict[str, int] = {}
        for state in states:
            t = state.task_type
            executed[t] = executed.get(t, 0) + state.executions_total
            newest[t] = max([newest.get(t, 0), *(e.seq for e in state.window)])
        clocks = {t: max(n, newest[t]) for t, n in executed.items()}
        with self._write_lock:
            self._clocks = dict(clocks)
        return states, clocks

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

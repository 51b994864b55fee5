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

from profiles.profile import ProfileState, WindowEntry
from profiles.records import ExecutionRecord
from profiles.store.connection import Connection

SCHEMA = """
DEFINE TABLE IF NOT EXISTS execution SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON execution TYPE string
    ASSERT string::len($value) > 0 AND string::len($value) <= 256;
DEFINE FIELD IF NOT EXISTS task_type ON execution TYPE string
    ASSERT string::len($value) > 0 AND string::len($value) <= 256;
DEFINE FIELD IF NOT EXISTS success ON execution TYPE bool;
DEFINE FIELD IF NOT EXISTS quality ON execution TYPE float ASSERT $value >= 0 AND $value <= 1;
DEFINE FIELD IF NOT EXISTS latency_ms ON execution TYPE float ASSERT $value >= 0;
DEFINE FIELD IF NOT EXISTS cost ON execution TYPE option<float> ASSERT $value = NONE OR $value >= 0;
DEFINE FIELD IF NOT EXISTS timestamp ON execution TYPE datetime;
DEFINE FIELD IF NOT EXISTS decision_id ON execution TYPE option<string>;
DEFINE FIELD IF NOT EXISTS metadata ON execution FLEXIBLE TYPE object;
DEFINE FIELD IF NOT EXISTS seq ON execution TYPE int ASSERT $value >= 1;
DEFINE INDEX IF NOT EXISTS execution_pair ON execution FIELDS agent_id, task_type;
DEFINE INDEX IF NOT EXISTS execution_decision ON execution FIELDS decision_id;

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

-- The recency window: one row per slot ((n - 1) mod window), overwritten in place, so a
-- write costs the same whether the profile has 1 or 100 recent records.
DEFINE TABLE IF NOT EXISTS recent SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON recent TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON recent TYPE string;
DEFINE FIELD IF NOT EXISTS t ON recent TYPE datetime;
DEFINE FIELD IF NOT EXISTS q ON recent TYPE float ASSERT $value >= 0 AND $value <= 1;
DEFINE FIELD IF NOT EXISTS s ON recent TYPE bool;
DEFINE FIELD IF NOT EXISTS k ON recent TYPE int ASSERT $value >= 1;
"""

# The body shared by single and bulk writes; $r is one row, $w the window size.
_APPLY_ONE = """
IF !record::exists(type::thing('execution', $r.record_id)) {
    LET $seq = (UPSERT type::thing('task_clock', [$r.task_type]) SET n += 1 RETURN VALUE n)[0];
    CREATE type::thing('execution', $r.record_id) CONTENT {
        agent_id: $r.agent_id, task_type: $r.task_type, success: $r.success,
        quality: $r.quality, latency_ms: $r.latency_ms, cost: $r.cost,
        timestamp: $r.timestamp, decision_id: $r.decision_id, metadata: $r.metadata,
        seq: $seq
    };
    LET $n = (UPSERT type::thing('profile', [$r.agent_id, $r.task_type]) SET
        agent_id = $r.agent_id, task_type = $r.task_type,
        executions_total += 1,
        executions_successful += (IF $r.success THEN 1 ELSE 0 END),
        quality_sum += $r.quality,
        latency_sum_ms += $r.latency_ms,
        cost_sum += ($r.cost ?? 0.0),
        cost_count += (IF $r.cost = NONE THEN 0 ELSE 1 END),
        last_updated = IF last_updated = NONE OR $r.timestamp > last_updated
            THEN $r.timestamp ELSE last_updated END
        RETURN VALUE executions_total)[0];
    UPSERT type::thing('recent', [$r.agent_id, $r.task_type, ($n - 1) % $w]) CONTENT {
        agent_id: $r.agent_id, task_type: $r.task_type,
        t: $r.timestamp, q: $r.quality, s: $r.success, k: $seq
    };
    RETURN $seq;
} ELSE {
    RETURN NONE;
};
"""

RECORD_ONE = "BEGIN TRANSACTION;\n" + _APPLY_ONE + "COMMIT TRANSACTION;"

RECORD_MANY = (
    "BEGIN TRANSACTION;\nLET $seqs = [];\nFOR $r IN $rows {"
    + _APPLY_ONE.replace("RETURN $seq;", "$seqs = array::push($seqs, $seq);")
    .replace("RETURN NONE;", "$seqs = array::push($seqs, NONE);")
    + "};\nRETURN $seqs;\nCOMMIT TRANSACTION;"
)


def _row(record: ExecutionRecord) -> dict[str, Any]:
    return {
        "record_id": record.record_id,
        "agent_id": record.agent_id,
        "task_type": record.task_type,
        "success": record.success,
        "quality": record.effective_quality,
        "latency_ms": record.latency_ms,
        "cost": record.cost,
        "timestamp": record.timestamp,
        "decision_id": record.decision_id,
        "metadata": record.metadata,
    }


class ExecutionRepository:
    """Writes executions and reads profile aggregates."""

    def __init__(self, conn: Connection, window_size: int = 100) -> None:
        self._conn = conn
        self.window_size = window_size

    def record(self, record: ExecutionRecord) -> int | None:
        """Write one execution; returns its task clock, or None if it already existed."""
        rows = self._conn.run(RECORD_ONE, {"r": _row(record), "w": self.window_size})
        seq = [r for r in rows if r is not None]
        return int(seq[-1]) if seq else None

    def record_many(self, records: Sequence[ExecutionRecord]) -> list[int | None]:
        """Write a batch in one transaction; per record its clock or None (duplicate)."""
        if not records:
            return []
        rows = self._conn.run(RECORD_MANY, {"rows": [_row(r) for r in records],
                                            "w": self.window_size})
        seqs = rows[-1]
        return [None if s is None else int(s) for s in seqs]

    def load(self) -> tuple[list[ProfileState], dict[str, int]]:
        """Every profile aggregate and task clock, for rebuilding the in-memory book."""
        profiles, recent, clocks = self._conn.run(
            "SELECT * FROM profile; SELECT agent_id, task_type, t, q, s, k FROM recent;"
            " SELECT * FROM task_clock;")
        windows: dict[tuple[str, str], list[WindowEntry]] = {}
        for e in recent:
            windows.setdefault((e["agent_id"], e["task_type"]), []).append(
                WindowEntry(e["t"].timestamp(), float(e["q"]), bool(e["s"]), int(e["k"])))
        states = [self._state(row, windows.get((row["agent_id"], row["task_type"]), []))
                  for row in profiles]
        return states, {row["id"].id[0]: int(row["n"]) for row in clocks}

    def _state(self, row: dict[str, Any], entries: list[WindowEntry]) -> ProfileState:
        window = deque(sorted(entries, key=lambda e: e.seq), maxlen=self.window_size)
        return ProfileState(
            agent_id=row["agent_id"], task_type=row["task_type"],
            window_size=self.window_size,
            executions_total=int(row["executions_total"]),
            executions_successful=int(row["executions_successful"]),
            quality_sum=float(row["quality_sum"]),
            latency_sum_ms=float(row["latency_sum_ms"]),
            cost_sum=float(row["cost_sum"]), cost_count=int(row["cost_count"]),
            last_updated=row.get("last_updated"), window=window,
        )

    def count(self) -> int:
        """Number of stored executions."""
        rows = self._conn.run("SELECT count() AS n FROM execution GROUP ALL;")
        return int(rows[0][0]["n"]) if rows[0] else 0

    def iter_executions(self, *, agent_id: str | None = None, task_type: str | None = None,
                        since: datetime | None = None, batch: int = 1000
                        ) -> Iterator[dict[str, Any]]:
        """Stored executions in clock order, optionally filtered; paged."""
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
                f"SELECT * FROM execution{where} ORDER BY timestamp LIMIT $lim START $start;",
                {**params, "lim": batch, "start": start},
            )[0]
            yield from page
            if len(page) < batch:
                return
            start += batch

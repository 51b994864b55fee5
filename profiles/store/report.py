"""Read-only queries of ``trustroute report``: a pair's executions in one indexed read,
trust history and the hand-off log over every pair at once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from itertools import chain
from typing import Any

from trustroute.profiles.store.connection import Connection
from trustroute.profiles.store.handoffs import HandoffRepository


def _where(task_type: str | None, since: datetime | None, time_field: str
           ) -> tuple[str, dict[str, Any]]:
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if task_type is not None:
        clauses.append("task_type = $task_type")
        params["task_type"] = task_type
    if since is not None:
        clauses.append(f"{time_field} >= $since")
        params["since"] = since
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


class ReportRepository:
    """Paged reads for the report; the hand-off tables are defined by their owner."""

    SCHEMA = HandoffRepository.SCHEMA  # idempotent: a fresh store has the tables to read

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def pair_executions(self, agent_id: str, task_type: str, since: datetime | None = None
                        ) -> list[tuple[datetime, float]]:
        """(timestamp, quality) of one pair's executions, unordered (one indexed read;
        paging the whole log in time order costs a scan per page)."""
        where = " AND timestamp >= $since" if since is not None else ""
        rows = self._conn.run(
            "SELECT VALUE [timestamp, quality] FROM execution WHERE agent_id = $a AND "
            f"task_type = $t{where};", {"a": agent_id, "t": task_type, "since": since})[0]
        return [(t, float(q)) for t, q in rows]

    def trust_history(self, task_type: str | None = None, since: datetime | None = None,
                      batch: int = 5000) -> Iterator[dict[str, Any]]:
        """Every pair's composite and tier over time, oldest first."""
        where, params = _where(task_type, since, "at")
        return chain.from_iterable(self._conn.pages(
            f"SELECT agent_id, task_type, composite, tier, at FROM trust_history{where} "
            "ORDER BY at", params, batch))

    def handoff_decisions(self, task_type: str | None = None, since: datetime | None = None,
                          batch: int = 5000) -> Iterator[dict[str, Any]]:
        """Answer-or-transfer decisions (task type, transferred, reason, time), oldest first."""
        where, params = _where(task_type, since, "created_at")
        return chain.from_iterable(self._conn.pages(
            f"SELECT task_type, transferred, reason, created_at FROM handoff_decision{where} "
            "ORDER BY created_at", params, batch))

    def pending_handoffs(self, task_type: str | None = None) -> list[dict[str, Any]]:
        """Count of transfers still pending per reason (every hook's row counts once)."""
        where = " AND task_type = $task_type" if task_type is not None else ""
        return list(self._conn.run(
            "SELECT reason, count() AS n FROM (SELECT request_id, reason FROM handoff_pending "
            f"WHERE status = 'pending'{where} GROUP BY request_id, reason) GROUP BY reason "
            "ORDER BY reason;", {"task_type": task_type})[0])

    def verdicts(self, task_type: str | None = None, since: datetime | None = None
                 ) -> list[dict[str, Any]]:
        """Verdicts on executions (``router.feedback``): task type, the execution or
        decision they are about, when given."""
        where, params = _where(task_type, since, "at")
        where = f"{where} AND key != NONE" if where else " WHERE key != NONE"
        return list(self._conn.run(
            f"SELECT task_type, record_id, decision_id, at FROM trust_feedback{where};",
            params)[0])

    def execution_times(self, task_type: str | None = None, since: datetime | None = None
                        ) -> Iterator[dict[str, Any]]:
        """Every execution's id, decision id, task type and timestamp, paged."""
        where, params = _where(task_type, since, "timestamp")
        yield from chain.from_iterable(self._conn.pages(
            "SELECT record::id(id) AS record_id, decision_id, task_type, timestamp "
            f"FROM execution{where}", params, 5000))

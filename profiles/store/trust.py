"""Trust counters, feedback, confidence history and the archive of retired profiles.

Counters per (agent, task type) only ever change by server-side increments (one
``vector::add`` on a packed array of counts) so routers in several processes against one
server add up instead of overwriting each other; packing keeps loading 10,000 pairs
cheap when a router opens. The decay offsets are changed server-side too, guarded by
the ISO week already applied, so a second decay run in the same week changes nothing.
Retiring a profile copies its executions into ``execution_archive`` in the same
transaction that deletes them: history is moved, never lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from surrealdb import RecordID

from trustroute.profiles.store.connection import Connection
from trustroute.profiles.trust_counts import COUNTERS, Pair, TrustCounts, TrustDelta

SCHEMA = """
DEFINE TABLE IF NOT EXISTS trust SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON trust TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON trust TYPE string;
-- counts: [observations, contradictions, positive, negative, neutral, approvals, rejections]
DEFINE FIELD IF NOT EXISTS counts ON trust TYPE array<int>
    ASSERT array::len($value) = 7 AND math::min($value) >= 0;
-- decay: offsets subtracted from [frequency, effectiveness, human] (scores floor at 0)
DEFINE FIELD IF NOT EXISTS decay ON trust TYPE array<float>
    ASSERT array::len($value) = 3 AND math::min($value) >= 0;
DEFINE FIELD IF NOT EXISTS reviewed ON trust TYPE bool;
DEFINE FIELD IF NOT EXISTS last_seen ON trust TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS deprecated_at ON trust TYPE option<datetime>;
DEFINE FIELD IF NOT EXISTS decay_week ON trust TYPE option<string>;
-- The tier last computed by a router (a cache): opening a router loads only the pairs
-- whose tier restricts routing (deprecated; core/strong in exploit-only mode), the rest
-- on first use, so opening a store of many pairs stays cheap.
DEFINE FIELD IF NOT EXISTS tier ON trust TYPE option<string>;
DEFINE INDEX IF NOT EXISTS trust_tier ON trust FIELDS tier;

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
DEFINE FIELD IF NOT EXISTS approved ON trust_feedback TYPE bool;
DEFINE FIELD IF NOT EXISTS kind ON trust_feedback TYPE string
    ASSERT $value IN ['feedback', 'review', 'signal'];
DEFINE FIELD IF NOT EXISTS signal ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS comment ON trust_feedback TYPE option<string>;
DEFINE FIELD IF NOT EXISTS at ON trust_feedback TYPE datetime;
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
DEFINE FIELD IF NOT EXISTS seq ON execution_archive TYPE int;
DEFINE FIELD IF NOT EXISTS archived_at ON execution_archive TYPE datetime;
DEFINE INDEX IF NOT EXISTS execution_archive_pair ON execution_archive FIELDS agent_id, task_type;

DEFINE TABLE IF NOT EXISTS trust_archive SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS agent_id ON trust_archive TYPE string;
DEFINE FIELD IF NOT EXISTS task_type ON trust_archive TYPE string;
DEFINE FIELD IF NOT EXISTS trust ON trust_archive FLEXIBLE TYPE object;
DEFINE FIELD IF NOT EXISTS profile ON trust_archive FLEXIBLE TYPE option<object>;
DEFINE FIELD IF NOT EXISTS archived_at ON trust_archive TYPE datetime;
"""

# Loading packs each row into one array with times as integer nanoseconds: decoding
# plain arrays is several times cheaper than rows of named fields and datetimes.
_PACKED = "[agent_id, task_type, counts, decay, reviewed]"
_PACKED_TIMES = ("[agent_id, task_type, counts, decay, reviewed, "
                 "IF last_seen THEN time::nano(last_seen) END, "
                 "IF deprecated_at THEN time::nano(deprecated_at) END]")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# One batch: counter updates ($d is a TrustDelta row; fresh evidence clears the decay
# offsets), then history and feedback rows.
_APPLY_BATCH = """
BEGIN TRANSACTION;
FOR $d IN $deltas {
    UPSERT type::thing('trust', [$d.agent_id, $d.task_type]) SET
        agent_id = $d.agent_id, task_type = $d.task_type,
        counts = vector::add(counts ?? [0, 0, 0, 0, 0, 0, 0], $d.counts),
        reviewed = IF $d.reviewed = NONE THEN (reviewed ?? false) ELSE $d.reviewed END,
        decay = IF $d.fresh OR decay = NONE THEN [0.0, 0.0, 0.0] ELSE decay END,
        deprecated_at = IF $d.restored THEN NONE ELSE deprecated_at END,
        tier = $d.tier ?? tier,
        last_seen = IF $d.at != NONE AND (last_seen = NONE OR $d.at > last_seen)
            THEN $d.at ELSE last_seen END;
};
FOR $h IN $history { CREATE trust_history CONTENT $h; };
FOR $f IN $feedback { CREATE trust_feedback CONTENT $f; };
COMMIT TRANSACTION;
"""

_DECAY = """
BEGIN TRANSACTION;
FOR $c IN $changes {
    UPDATE type::thing('trust', [$c.agent_id, $c.task_type]) SET
        decay = vector::add(decay, $offsets),
        decay_week = $week, tier = $c.tier
    WHERE decay_week != $week;
};
FOR $m IN $marks {
    UPDATE type::thing('trust', [$m.agent_id, $m.task_type]) SET deprecated_at = $m.at;
};
FOR $h IN $history { CREATE trust_history CONTENT $h; };
COMMIT TRANSACTION;
"""

_RETIRE = """
BEGIN TRANSACTION;
LET $key = [$agent_id, $task_type];
FOR $e IN (SELECT * FROM execution WHERE agent_id = $agent_id AND task_type = $task_type) {
    UPSERT type::thing('execution_archive', record::id($e.id)) CONTENT {
        agent_id: $e.agent_id, task_type: $e.task_type, success: $e.success,
        quality: $e.quality, latency_ms: $e.latency_ms, cost: $e.cost,
        timestamp: $e.timestamp, decision_id: $e.decision_id, metadata: $e.metadata,
        seq: $e.seq, archived_at: $at
    };
};
LET $trust = (SELECT * OMIT id FROM ONLY type::thing('trust', $key));
LET $profile = (SELECT * OMIT id FROM ONLY type::thing('profile', $key));
CREATE trust_archive CONTENT {
    agent_id: $agent_id, task_type: $task_type, trust: $trust ?? {},
    profile: $profile, archived_at: $at
};
DELETE execution WHERE agent_id = $agent_id AND task_type = $task_type;
DELETE type::thing('profile', $key);
DELETE type::thing('profile_window', $key);
DELETE type::thing('trust', $key);
CREATE trust_history CONTENT $history;
RETURN (SELECT count() AS n FROM execution_archive
        WHERE agent_id = $agent_id AND task_type = $task_type GROUP ALL)[0].n ?? 0;
COMMIT TRANSACTION;
"""


def _delta_row(d: TrustDelta) -> dict[str, Any]:
    """A delta's bound-parameter form."""
    return {"agent_id": d.agent_id, "task_type": d.task_type,
            "counts": [getattr(d, name) for name in COUNTERS], "reviewed": d.reviewed,
            "fresh": d.fresh, "restored": d.restored, "at": d.at, "tier": d.tier}


class TrustRepository:
    """Reads and writes everything the trust layer keeps."""

    SCHEMA = SCHEMA

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    # -- counters --------------------------------------------------------------------
    def _counts(self, source: str, params: dict[str, Any] | None = None, *,
                times: bool = False) -> dict[Pair, TrustCounts]:
        rows = self._conn.run(f"SELECT VALUE {_PACKED_TIMES if times else _PACKED} "
                              f"FROM {source};", params)[0]
        return {(r[0], r[1]): counts_from_packed(r) for r in rows}

    def load(self) -> dict[Pair, TrustCounts]:
        """Every pair's counts, with ``last_seen`` and ``deprecated_at`` (the lifecycle
        job's view; the router reads only the pairs it needs, without the two times,
        which makes reading many pairs about a third cheaper)."""
        return self._counts("trust", times=True)

    def load_tiers(self, tiers: Sequence[str]) -> dict[Pair, TrustCounts]:
        """The pairs whose cached tier is one of ``tiers`` (indexed: cheap)."""
        return self._counts("trust WHERE tier IN $tiers", {"tiers": list(tiers)}) \
            if tiers else {}

    def get_many(self, pairs: Sequence[Pair], *, times: bool = False
                 ) -> dict[Pair, TrustCounts]:
        """The stored counts of the given pairs (absent pairs are left out)."""
        ids = [RecordID("trust", [a, t]) for a, t in pairs]
        return self._counts("$ids", {"ids": ids}, times=times) if ids else {}

    def get(self, agent_id: str, task_type: str) -> TrustCounts | None:
        """One pair's counts, or None."""
        return self.get_many([(agent_id, task_type)], times=True).get((agent_id, task_type))

    def apply(self, deltas: Sequence[TrustDelta], history: Sequence[dict[str, Any]],
              feedback: Sequence[dict[str, Any]]) -> None:
        """Write counter increments, history rows and feedback rows in one transaction."""
        if deltas or history or feedback:
            self._conn.run(_APPLY_BATCH, {"deltas": [_delta_row(d) for d in deltas],
                                          "history": list(history), "feedback": list(feedback)})

    # -- lifecycle -------------------------------------------------------------------
    def week_applied(self, week: str) -> dict[str, Any] | None:
        """The decay run recorded for ``week``, if any."""
        rows = self._conn.run("SELECT * FROM ONLY type::thing('trust_run', $w);", {"w": week})
        return rows[0] if rows and rows[0] else None

    def decay(self, week: str, offsets: Sequence[float], changes: Iterable[dict[str, Any]],
              marks: Iterable[dict[str, Any]], history: Iterable[dict[str, Any]]) -> None:
        """Add the decay ``offsets`` (frequency, effectiveness, human) to the pairs in
        ``changes`` (once per pair per week, with their new tier), set deprecation marks,
        log history."""
        self._conn.run(_DECAY, {"week": week, "offsets": list(offsets),
                                "changes": list(changes), "marks": list(marks),
                                "history": list(history)})

    def record_run(self, week: str, decayed: int, deprecated: int, deleted: int,
                   at: datetime) -> None:
        """Remember that the decay job ran for ``week`` (its idempotency key)."""
        self._conn.run("UPSERT type::thing('trust_run', $w) CONTENT {week: $w, decayed: $a, "
                       "deprecated: $b, deleted: $c, at: $at};",
                       {"w": week, "a": decayed, "b": deprecated, "c": deleted, "at": at})

    def retire(self, agent_id: str, task_type: str, history: dict[str, Any],
               at: datetime) -> int:
        """Archive a pair's executions, counts and profile, then delete them; returns the
        number of archived executions of the pair."""
        rows = self._conn.run(_RETIRE, {"agent_id": agent_id, "task_type": task_type,
                                        "history": history, "at": at})
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


def _moment(nanos: int | None) -> datetime | None:
    return None if nanos is None else _EPOCH + timedelta(microseconds=int(nanos) // 1000)


def counts_from_packed(row: Sequence[Any]) -> TrustCounts:
    """A packed row (with or without the two times) as TrustCounts."""
    counts, decay, reviewed, *times = row[2:]
    last_seen, deprecated_at = times or (None, None)
    f, e, h = (min(1.0, float(x)) for x in decay or (0.0, 0.0, 0.0))
    return TrustCounts(
        **{name: int(c) for name, c in zip(COUNTERS, counts or (0,) * len(COUNTERS),
                                            strict=True)},
        reviewed=bool(reviewed), frequency_decay=f, effectiveness_decay=e, human_decay=h,
        last_seen=_moment(last_seen), deprecated_at=_moment(deprecated_at))

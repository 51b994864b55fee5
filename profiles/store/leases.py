"""Limits shared by every process on one server store: in-flight leases and rate tokens.

Counting rows ("how many leases does agent A hold?") and inserting one more is not safe
here: SurrealDB does not make a count and an insert of *different* rows serializable,
and concurrent ``+=`` on one row loses increments. What it does guarantee is that two
transactions writing the *same* row conflict, and one of them is retried. So each limit
is a fixed set of rows that are taken, never counted:

- ``lease:[agent, i]`` for i in 0 .. max_concurrent-1: a slot is free when it has no
  holder or its ``expires`` (database clock) has passed. Taking one is one transaction
  that takes the first free slot from a random one on and writes its holder and expiry;
  two processes that pick the same slot write the same row, so one of them loses the
  conflict and runs again (and then sees the slot taken). Renewal moves ``expires``
  forward for slots whose holder is still ours; release clears a slot only when its
  holder is ours (compare and set), so a lease that expired and was taken by another
  process is never freed by its old holder.
- ``rate_token:[agent, j]`` for j in 0 .. rpm-1: a token is free when it was last taken
  more than 60 s ago (database clock). A call that starts takes a lease and, when the
  agent has an ``rpm``, a token, in the same transaction: both or neither.

The rows of an agent are created once per process and limit (``INSERT IGNORE``: rows
that exist are left alone). All times are the database's, so the processes' own clocks
do not matter; a step of the database clock moves every expiry with it (see
docs/storage.md, "Limits shared by all workers").
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from surrealdb import RecordID

from trustroute.profiles.store.connection import Connection

#: Before any real expiry or take: a row created with it is free.
_LONG_AGO = datetime(1970, 1, 1, tzinfo=UTC)

# The first free slot from a random one on (wrapping around), so takers spread over the
# slots and a take reads one row while most are free; every row only when all are taken.
_TAKE = """
BEGIN;
LET $now = time::now();
LET $free = (SELECT VALUE id FROM lease:[$agent, $start]..[$agent, $limit]
             WHERE holder = NONE OR expires <= $now LIMIT 1);
LET $free = IF $free THEN $free ELSE (SELECT VALUE id FROM lease:[$agent, 0]..[$agent, $start]
             WHERE holder = NONE OR expires <= $now LIMIT 1) END;
LET $tok = IF $rpm = NONE THEN [] ELSE
    (SELECT VALUE id FROM rate_token:[$agent, $first]..[$agent, $rpm]
     WHERE taken <= $now - 1m LIMIT 1) END;
LET $tok = IF $rpm = NONE OR $tok THEN $tok ELSE
    (SELECT VALUE id FROM rate_token:[$agent, 0]..[$agent, $first]
     WHERE taken <= $now - 1m LIMIT 1) END;
LET $ok = array::len($free) > 0 AND ($rpm = NONE OR array::len($tok) > 0);
IF $ok {
    UPDATE $free[0] SET holder = $holder, expires = $now + duration::from::millis($ttl_ms);
    IF $rpm != NONE { UPDATE $tok[0] SET taken = $now; };
};
RETURN {slot: IF $ok THEN $free[0] ELSE NONE END, free: array::len($free) > 0,
        token: array::len($tok) > 0};
COMMIT;
"""


class Take(NamedTuple):
    """What one try to take a lease found: the slot taken (None when none was), whether a
    slot was free, and whether a rate token was (False when the agent has no rpm)."""

    slot: RecordID | None
    free: bool
    token: bool


class LeaseRepository:
    """SurrealQL for shared limits (use ``store.repository(LeaseRepository)``)."""

    SCHEMA = """
DEFINE TABLE IF NOT EXISTS lease SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS holder ON lease TYPE option<string>;
DEFINE FIELD IF NOT EXISTS expires ON lease TYPE datetime;
DEFINE TABLE IF NOT EXISTS rate_token SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS taken ON rate_token TYPE datetime;
"""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def create(self, agent: str, limit: int, rpm: int | None) -> None:
        """Make sure the agent's slot rows (and token rows) exist; existing ones are kept."""
        rows = [{"id": RecordID("lease", [agent, i]), "expires": _LONG_AGO}
                for i in range(limit)]
        tokens = [{"id": RecordID("rate_token", [agent, j]), "taken": _LONG_AGO}
                  for j in range(rpm or 0)]
        self.conn.run("INSERT IGNORE INTO lease $rows RETURN NONE;"
                      "INSERT IGNORE INTO rate_token $tokens RETURN NONE;",
                      {"rows": rows, "tokens": tokens})

    def take(self, agent: str, limit: int, rpm: int | None, holder: str, ttl_s: float) -> Take:
        """Take a free slot of ``agent`` (and a rate token when ``rpm`` is set) for
        ``holder``, expiring ``ttl_s`` seconds from now by the database clock."""
        answer: dict[str, Any] = self.conn.run(_TAKE, {
            "agent": agent, "limit": limit, "rpm": rpm, "holder": holder,
            "start": random.randrange(limit), "first": random.randrange(rpm or 1),
            "ttl_ms": round(ttl_s * 1000)})[-1]
        return Take(answer["slot"], bool(answer["free"]), bool(answer["token"]))

    def renew(self, leases: Sequence[tuple[RecordID, str]], ttl_s: float) -> set[str]:
        """Extend the expiry of each (slot, holder) still held by that holder; returns
        the holders that still held their slot."""
        if not leases:
            return set()
        held: list[str] = self.conn.run(
            "UPDATE $slots SET expires = time::now() + duration::from::millis($ttl_ms) "
            "WHERE holder IN $holders RETURN VALUE holder;",
            {"slots": [slot for slot, _ in leases], "holders": [h for _, h in leases],
             "ttl_ms": round(ttl_s * 1000)})[0]
        return set(held)

    def release(self, slot: RecordID, holder: str) -> bool:
        """Free ``slot`` if ``holder`` still holds it; False when it did not."""
        freed = self.conn.run("UPDATE $slot SET holder = NONE, expires = time::now() "
                              "WHERE holder = $holder RETURN VALUE id;",
                              {"slot": slot, "holder": holder})[0]
        return bool(freed)

    def release_all(self, leases: Iterable[tuple[RecordID, str]]) -> None:
        """Free every (slot, holder) pair still held by its holder, in one request."""
        pairs = list(leases)
        if pairs:
            self.conn.run("UPDATE $slots SET holder = NONE, expires = time::now() "
                          "WHERE holder IN $holders RETURN NONE;",
                          {"slots": [slot for slot, _ in pairs],
                           "holders": [h for _, h in pairs]})

    def held(self) -> dict[str, int]:
        """Unexpired leases per agent, across every process."""
        rows = self.conn.run(
            "SELECT record::id(id)[0] AS agent, count() AS n FROM lease "
            "WHERE holder != NONE AND expires > time::now() GROUP BY agent;")[0]
        return {row["agent"]: int(row["n"]) for row in rows}

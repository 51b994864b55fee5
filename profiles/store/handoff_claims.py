"""Who delivers a pending hand-off row: a claim that at most one worker wins.

A delivery takes its row before sending it: a sweep takes rows unchanged for an interval,
a queued delivery the row nobody has taken since it was stored. A compare-and-set
``UPDATE`` of the row cannot decide that: the engine lets two concurrent writers of one
row both succeed (measured: 1–2 rows of 60 won twice in a 6-way race, so a hand-off was
sent twice). So, as for the shared limits (``leases.py``), no claimer decides by
writing the shared row. Each writes a row of its own,
``handoff_claim:[request_id, hook, version, claimer]``, where ``version`` is the row's
``updated_at`` as the claimer saw it, and only if the row was still pending and
claimable then; *after that committed*, it counts the claims of that version:

- exactly one, its own: it won. It moves the row's ``updated_at`` (and ``claimed_at``)
  on, so no later claimer sees that version again, and delivers;
- more: it withdraws and deletes its claim. The row stays pending for the next sweep.

At most one claimer wins a version: of any two claims of one version, the one committed
last was counted after both had committed, so it saw two; and a winner's claim is never
deleted, so every later claimer of that version counts it too (only claims that lost
are deleted, so that a version whose claimers all withdrew can be taken by the next
one). Two racing claimers may both withdraw: a later send, never a second one. A
retried take (its answer lost with the connection) writes the same claim again
(``UPSERT``), so it is counted once. A sweep deletes claims older than an hour (a
claimer stalled that long between its read and its count could win an old version).
A row claimed again once unchanged for the interval (a delivery that outlasts it) is a
new version: that second send is the documented one (docs/handoff.md).
"""

from __future__ import annotations

import uuid

from trustroute.profiles.store.connection import Connection

_TAKE = """
LET $row = (SELECT status, updated_at, claimed_at, not_before
            FROM ONLY type::thing('handoff_pending', [$rid, $hook]));
LET $version = IF $row = NONE THEN NONE ELSE <string> $row.updated_at END;
LET $open = $row != NONE AND $row.status = 'pending' AND (IF $new THEN
    $row.claimed_at = NONE ELSE
    $row.updated_at < time::now() - duration::from::millis($ms)
    AND ($row.not_before = NONE OR $row.not_before <= time::now()) END);
IF $open {
    UPSERT type::thing('handoff_claim', [$rid, $hook, $version, $claimer])
        SET at = time::now() RETURN NONE;
};
LET $claims = IF $open THEN count(SELECT VALUE id FROM
    handoff_claim:[$rid, $hook, $version, NONE]..[$rid, $hook, $version, {}]) ELSE 0 END;
IF $claims > 1 { DELETE type::thing('handoff_claim', [$rid, $hook, $version, $claimer]); };
RETURN IF $claims = 1 THEN array::len((UPDATE type::thing('handoff_pending', [$rid, $hook])
    SET updated_at = time::now(), claimed_at = time::now()
    WHERE status = 'pending' AND <string> updated_at = $version RETURN VALUE id)) = 1
    ELSE false END;
"""


class HandoffClaims:
    """SurrealQL for taking a pending hand-off row to deliver it (use
    ``store.repository(HandoffClaims)``)."""

    SCHEMA = """
DEFINE TABLE IF NOT EXISTS handoff_claim SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS at ON handoff_claim TYPE datetime;
"""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def take(self, request_id: str, hook: str, unchanged_s: float = 0.0) -> bool:
        """A sweep's take: the row is pending, unchanged for ``unchanged_s`` by the
        database's clock and not held by a receiver's Retry-After, and this claimer
        alone claimed it as it is. True: send it."""
        return self._take(request_id, hook, new=False, unchanged_s=unchanged_s)

    def take_new(self, request_id: str, hook: str) -> bool:
        """A queued delivery's take: nobody has taken the row since it was stored (when
        another process's sweep took it first, that sweep delivers it). True: send it."""
        return self._take(request_id, hook, new=True)

    def collect(self) -> None:
        """Delete claims older than an hour (the sweeps do, once each)."""
        self._conn.run("DELETE handoff_claim WHERE at < time::now() - 1h RETURN NONE;")

    def _take(self, request_id: str, hook: str, *, new: bool, unchanged_s: float = 0.0
              ) -> bool:
        answers = self._conn.run(_TAKE, {
            "rid": request_id, "hook": hook, "new": new, "ms": round(unchanged_s * 1000),
            "claimer": uuid.uuid4().hex})
        return answers[-1] is True

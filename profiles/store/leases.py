"""Limits shared by every process on one server store: in-flight leases and call starts.

The engine cannot be trusted to make two transactions that write the *same* row
conflict: under concurrent commits both can succeed, so a read-modify-write of a shared
slot row (or a ``CREATE`` of one id, or ``+=``) is occasionally done twice (measured on
surrealdb 2.0.0's engine: two ``CREATE`` of one id both succeed in 4-6 % of 8-way races
on mem, 26 % on surrealkv; ``+=`` loses about 2 % of increments). So no row
here is ever written by two processes. Each holder writes rows of its own and then
counts; the limit holds by this argument, not by conflict detection:

- ``lease_claim:[agent, holder]``: one row per lease, written by its holder only, with
  ``expires`` (database clock). A take is one request of two steps: a transaction
  creates the claim (and, when the agent has an ``rpm``, ``rate_start:[agent, holder]``
  stamped ``at``: both or neither); *after it committed*, the live claims of the agent
  are counted. More than ``max_concurrent`` (or more than ``rpm`` starts in the last
  minute): the holder deletes its own rows and the take is refused. Why no more than
  ``max_concurrent`` can ever be admitted at once: of any ``max_concurrent + 1`` live
  claims, the one committed last was counted after all the others had committed, so its
  count saw ``max_concurrent + 1`` and it withdrew. Two takers racing for the last slot
  may both withdraw (both count one too many): a refused take, never an overrun.
- Renewal moves ``expires`` forward only for the holder's own claims that have not
  expired (an expired claim may already have let another take in: it is never revived);
  release deletes the holder's own claim. Expired claims and starts older than the
  minute are deleted with the renewals (by anyone: nobody counts them any more).

All times are the database's (``time::now()``), so the processes' own clocks do not
matter (see docs/storage.md, "Limits shared by all workers").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from surrealdb import RecordID

from trustroute.profiles.store.connection import Connection

# Count and, when there is room, claim (one transaction); then count again in a later
# transaction, which sees every claim committed before this one (see the module
# docstring). The first count only spares a claim when the agent is plainly full. UPSERT
# and the unconditional DELETE of a refused take make a retried take (its first try
# stored, its answer lost with the connection) leave no second or stray claim.
_TAKE = """
BEGIN;
LET $live = count(SELECT VALUE id FROM lease_claim:[$agent, NONE]..[$agent, {}]
                  WHERE expires > time::now());
LET $starts = IF $rpm = NONE THEN 0 ELSE
    count(SELECT VALUE id FROM rate_start:[$agent, NONE]..[$agent, {}]
          WHERE at > time::now() - 1m) END;
LET $claim = $live < $limit AND ($rpm = NONE OR $starts < $rpm);
IF $claim {
    UPSERT type::thing('lease_claim', [$agent, $holder])
        SET expires = time::now() + duration::from::millis($ttl_ms) RETURN NONE;
    IF $rpm != NONE {
        UPSERT type::thing('rate_start', [$agent, $holder]) SET at = time::now() RETURN NONE;
    };
};
COMMIT;
LET $seen = IF !$claim THEN {live: $live, starts: $starts, ok: false} ELSE {
    live: count(SELECT VALUE id FROM lease_claim:[$agent, NONE]..[$agent, {}]
                WHERE expires > time::now()),
    starts: IF $rpm = NONE THEN 0 ELSE count(SELECT VALUE id FROM
        rate_start:[$agent, NONE]..[$agent, {}] WHERE at > time::now() - 1m) END,
    ok: true} END;
LET $ok = $seen.ok AND $seen.live <= $limit AND ($rpm = NONE OR $seen.starts <= $rpm);
IF !$ok {
    DELETE type::thing('lease_claim', [$agent, $holder]),
           type::thing('rate_start', [$agent, $holder]);
};
RETURN {ok: $ok, live: $seen.live, contended: $claim AND !$ok,
        limited: $rpm != NONE AND $seen.starts >= $rpm + IF $claim THEN 1 ELSE 0 END};
"""

#: Rows nobody counts any more: claims expired a minute ago, starts older than 2 minutes
#: (well past the minute an ``rpm`` looks at, and past any claim's renewal race).
_COLLECT = """
DELETE lease_claim WHERE expires < time::now() - 1m RETURN NONE;
DELETE rate_start WHERE at < time::now() - 2m RETURN NONE;
"""


class Take(NamedTuple):
    """What one take found: the claim admitted (None when refused), the live claims it
    counted (its own among them when it claimed), whether the ``rpm`` refused it, and
    whether it claimed and then withdrew (others raced it for the last slot)."""

    claim: Claim | None
    live: int
    limited: bool
    contended: bool = False


#: A lease's row in the store (``claim_of``): opaque outside this module.
Claim = RecordID


def claim_of(agent: str, holder: str) -> Claim:
    """The row ``holder``'s lease of ``agent`` is (or would be) stored as."""
    return RecordID("lease_claim", [agent, holder])


class LeaseRepository:
    """SurrealQL for shared limits (use ``store.repository(LeaseRepository)``)."""

    SCHEMA = """
DEFINE TABLE IF NOT EXISTS lease_claim SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS expires ON lease_claim TYPE datetime;
DEFINE TABLE IF NOT EXISTS rate_start SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS at ON rate_start TYPE datetime;
"""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def take(self, agent: str, limit: int, rpm: int | None, holder: str, ttl_s: float) -> Take:
        """Claim a lease of ``agent`` (and a call start when ``rpm`` is set) for
        ``holder``, expiring ``ttl_s`` seconds from now by the database clock; admitted
        only if, counted after the claim committed, at most ``limit`` claims are live."""
        answer: dict[str, Any] = self.conn.run(_TAKE, {
            "agent": agent, "limit": limit, "rpm": rpm, "holder": holder,
            "ttl_ms": round(ttl_s * 1000)})[-1]
        claim = claim_of(agent, holder) if answer["ok"] else None
        return Take(claim, int(answer["live"]), bool(answer["limited"]),
                    bool(answer["contended"]))

    def renew(self, claims: Sequence[Claim], ttl_s: float) -> set[str]:
        """Extend the expiry of each claim that has not expired, and delete the rows
        nobody counts any more; returns the holders whose claims are still held."""
        if not claims:
            return set()
        kept: list[str] = self.conn.run(
            "UPDATE $claims SET expires = time::now() + duration::from::millis($ttl_ms) "
            "WHERE expires > time::now() RETURN VALUE record::id(id)[1];" + _COLLECT,
            {"claims": list(claims), "ttl_ms": round(ttl_s * 1000)})[0]
        return set(kept)

    def release(self, claim: Claim) -> None:
        """Delete ``claim`` (a holder's own row; nothing when it is gone)."""
        self.conn.run("DELETE $claim RETURN NONE;", {"claim": claim})

    def release_all(self, claims: Iterable[Claim]) -> None:
        """Delete every one of ``claims``, in one request."""
        rows = list(claims)
        if rows:
            self.conn.run("DELETE $claims RETURN NONE;", {"claims": rows})

    def held(self) -> dict[str, int]:
        """Live leases per agent, across every process."""
        rows = self.conn.run(
            "SELECT record::id(id)[0] AS agent, count() AS n FROM lease_claim "
            "WHERE expires > time::now() GROUP BY agent;")[0]
        return {row["agent"]: int(row["n"]) for row in rows}

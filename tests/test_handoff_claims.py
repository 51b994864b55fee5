"""Taking a pending hand-off row to deliver it: at most one of several racing workers
wins a row (profiles/store/handoff_claims.py), on a server whose connections' requests
run at once, where a compare-and-set of the row let two win."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from surreal_fixtures import Target, serve

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoff_claims import HandoffClaims
from trustroute.profiles.store.handoffs import HandoffRepository

RACERS = 6
ROWS = 200
SWEEP_S = 2.0  # a sweep's interval: a row taken is not due again for that long


@pytest.fixture(name="surreal")
def surreal_fixture() -> Iterator[Target]:
    yield from serve(serialized=False)  # requests of different workers run at once


def race(stores: list[Store], rid: str, take: Callable[[HandoffClaims, str, int], bool]
         ) -> int:
    """How many of the stores' claimers won ``rid``, all starting at once."""
    wins: list[int] = []
    barrier = threading.Barrier(len(stores))

    def one(store: Store, racer: int) -> None:
        claims = store.repository(HandoffClaims)
        barrier.wait()
        if take(claims, rid, racer):
            wins.append(1)

    threads = [threading.Thread(target=one, args=(s, i)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(wins)


def test_racing_workers_never_both_take_a_row(surreal: Target) -> None:
    stores = [Store(surreal.url, **surreal.options()) for _ in range(RACERS)]
    try:
        repo = stores[0].repository(HandoffRepository)
        rids = [f"r{n}" for n in range(ROWS)]
        for rid in rids:
            repo.save_pending({"request_id": rid, "reason": "x"}, hook="desk", error="")
        time.sleep(SWEEP_S + 0.5)  # every row is due for a sweep; once taken, it is not
        winners = {}
        for n, rid in enumerate(rids):
            if n % 2:  # queued deliveries of several processes
                winners[rid] = race(stores, rid, lambda c, r, i: c.take_new(r, "desk"))
            else:  # queued deliveries against the sweeps of other processes
                winners[rid] = race(stores, rid, lambda c, r, i: (
                    c.take_new(r, "desk") if i % 2 else c.take(r, "desk", SWEEP_S)))
        assert max(winners.values()) == 1, {r: n for r, n in winners.items() if n > 1}
        # racers that all withdrew left their row to the next sweep, which takes it alone
        time.sleep(0.01)
        claims = stores[0].repository(HandoffClaims)
        assert all(claims.take(rid, "desk", 0.0) for rid, n in winners.items() if n == 0)
    finally:
        for store in stores:
            store.close()


def test_what_a_take_needs() -> None:
    with Store("mem://") as store:
        repo, claims = store.repository(HandoffRepository), store.repository(HandoffClaims)
        assert not claims.take_new("missing", "desk") and not claims.take("missing", "desk")
        repo.save_pending({"request_id": "r1", "reason": "x"}, hook="desk", error="")
        assert claims.take_new("r1", "desk")
        assert not claims.take_new("r1", "desk")  # taken since it was stored
        assert not claims.take("r1", "desk", 60.0)  # just taken: not unchanged for 60 s
        time.sleep(0.02)
        assert claims.take("r1", "desk", 0.01)  # unchanged that long: a sweep takes it
        repo.mark_failed("r1", "desk", error="503", attempts=1, retry_after_s=60)
        time.sleep(0.02)
        assert not claims.take("r1", "desk", 0.01)  # the receiver asked for 60 s
        repo.save_pending({"request_id": "r2", "reason": "x"}, hook="desk", error="")
        repo.mark_delivered("r2", "desk")
        time.sleep(0.02)
        assert not claims.take("r2", "desk", 0.0) and not claims.take_new("r2", "desk")
        claims.collect()  # claims younger than an hour stay: a new take still counts them
        assert not claims.take_new("r1", "desk")

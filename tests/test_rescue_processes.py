"""Rescue dating across OS processes on the test server: agent ``a`` fails a user task in
one worker process and agent ``b`` rescues it in another, in either order (a failure
reported after its rescue is charged too). The contradiction is dated by the rescue in
every router that folds both: the worker that recorded second (it folded the other's
record first, from the log or the cache), a router that followed both records as they
came, a fresh router and one that read the whole log.

Time: no router, trust layer or rescue tracker takes a clock to inject; time enters
only as each record's documented ``timestamp`` (when it ran, as its worker stamped it)
and as the decay job's ``now``. The failure is stamped 20 days before now and the rescue
3 days before now, a step of 17 days between the two workers' stamps, so the date is
visible where it matters: dated by the rescue, ``a`` was seen 3 days ago and a decay run
now leaves it alone; dated by the failure, it would be unseen for 20 days and decayed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from learning_worker import held
from surreal_fixtures import Target

from trustroute import AgentRouter
from trustroute.profiles.records import utc_now

WORKER = Path(__file__).with_name("learning_worker.py")

pytestmark = pytest.mark.slow


def attempt(surreal: Target, agent: str, success: bool, number: int,
            when: datetime) -> dict[str, Any]:
    """Another OS process records one attempt at user task ``T`` and says what it holds
    for ``a`` on ``t``, as ``held`` says it here (tests/learning_worker.py)."""
    proc = subprocess.run([sys.executable, str(WORKER), surreal.url, surreal.database,
                           "attempt", agent, "1" if success else "0", "T", str(number),
                           when.isoformat()], env=surreal.env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    held: dict[str, Any] = json.loads(proc.stdout)
    return held


def open_router(surreal: Target) -> AgentRouter:
    return AgentRouter(agents=["a", "b"], seed=0, store=surreal.url,
                       store_options=surreal.options(sync_delay_s=0.5))


@pytest.mark.parametrize("rescue_first", [False, True],
                         ids=["failure-then-rescue", "rescue-then-failure"])
def test_a_contradiction_is_dated_by_its_rescue_whichever_worker_records_first(
        surreal: Target, rescue_first: bool) -> None:
    now = utc_now().replace(microsecond=0)
    failed_at, rescued_at = now - timedelta(days=20), now - timedelta(days=3)
    failure = ("a", False, 0, failed_at)  # attempt 0 failed ...
    rescue = ("b", True, 1, rescued_at)  # ... attempt 1, by another agent, succeeded
    with open_router(surreal) as following:  # opened before either record
        for agent, success, number, when in (rescue, failure) if rescue_first else (
                failure, rescue):
            second = attempt(surreal, agent, success, number, when)
        deadline = time.monotonic() + 60  # both records reach it within sync_delay_s
        while sum(following.trust_layer.book.counts(x, "t").observations
                  for x in "ab") < 2:
            assert time.monotonic() < deadline, "the records did not reach the router"
            time.sleep(0.05)
        followed = held(following)
    with open_router(surreal) as fresh:  # from the second worker's cached projection
        opened = held(fresh)
        fresh.refresh()  # and from the whole log
        read = held(fresh)
    dated = {"contradictions": 1, "last_seen": rescued_at.isoformat(), "decayed": 0}
    assert second == dated  # the worker that recorded second, having folded the other
    assert followed == dated
    assert opened == read == dated

"""Shared learning: several OS processes route and record against one server, and every
router ends up holding what one process holding the same log would hold.

The workers are tests/server_workers.py processes (their own AgentRouter each). The
views compared are what a router learned: per pair its profile (at one fixed moment), its
window (time, quality, success, seq) and its trust counts.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from router_views import view
from surreal_fixtures import Target
from test_store_server import finish, start_workers
from test_trust_lifecycle import T0, seed_good_and_bad

from trustroute import AgentRouter
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import Store

pytestmark = pytest.mark.slow
AGENTS = ["a", "b", "c"]


def test_four_processes_record_exactly_and_every_router_converges(
        surreal_concurrent: Target, tmp_path: Path) -> None:
    """4 processes x 1,000 select()+record() at once on a server that runs them
    concurrently: no acknowledged record is lost; stored rows, profile totals and trust
    counts are exact; a router that watched without refresh() holds, within 2 s of the
    last write, exactly what a freshly opened router holds."""
    target = surreal_concurrent
    with AgentRouter(agents=AGENTS, store=target.url,
                     store_options=target.options()) as watcher:
        files = [tmp_path / f"acked-{i}.txt" for i in range(4)]
        acked = finish(start_workers(target, files, count=1000), files, timeout=600)
        assert len(acked) == len(set(acked)) == 4000
        done = time.monotonic()
        with AgentRouter(agents=AGENTS, store=target.url,
                         store_options=target.options()) as fresh:
            assert fresh.store.executions.stored_ids(acked) == set(acked)
            assert fresh.store.executions.count() == 4000
            expected = view(fresh)
            totals = [p.executions_total for p in fresh.profiles()]
            assert sum(totals) == 4000
            observations = [fresh.trust_layer.book.counts(a, "code").observations
                            for a in AGENTS]
            assert sum(observations) == 4000
            successes = sum(p.executions_successful for p in fresh.profiles())
            assert successes == 4 * sum(1 for n in range(1000) if n % 3)
        while view(watcher) != expected:  # the watcher never calls refresh()
            assert time.monotonic() - done < 2.0, "the watcher did not converge in 2 s"
            time.sleep(0.05)


def test_evidence_after_four_processes_equals_one_process(
        surreal_concurrent: Target, tmp_path: Path) -> None:
    """The log written by 4 processes at once, recorded again by one process in the
    same order, gives the same evidence: windows, seqs, profiles and trust counts."""
    target = surreal_concurrent
    files = [tmp_path / f"acked-{i}.txt" for i in range(4)]
    finish(start_workers(target, files, count=150), files)
    with Store(target.url, **target.options()) as store:
        rows = store.executions.scan()
    with AgentRouter(agents=AGENTS, store=target.url,
                     store_options=target.options()) as shared, \
            AgentRouter(agents=AGENTS, store="mem://") as alone:
        for row in rows:  # one at a time, in the log's order
            alone.record(ExecutionRecord.model_validate(row.record.model_dump()))
        assert len(rows) == 600
        assert view(shared) == view(alone)


def test_a_row_that_arrives_late_takes_its_place(surreal: Target) -> None:
    """Rows reach a router out of log order (another router's write committed between
    this router's write and its look): the router places it, and its view equals a
    freshly opened router's, seqs included."""
    opts = surreal.options(sync_delay_s=3600.0)  # no background looks: this test looks
    with AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as first, \
            AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as second:
        for n in range(30):
            writer = first if n % 3 else second
            writer.record(agent_id=AGENTS[n % 3], task_type="code", success=n % 2 == 0,
                          quality=0.5 + n / 100)
        assert first.projection.catch_up() > 0
        assert second.projection.catch_up() > 0
        with AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as fresh:
            assert view(first) == view(fresh) == view(second)
            assert fresh.book.clock("code") == 30


def test_people_and_signals_reach_other_routers(surreal: Target) -> None:
    """A review and a signal given to one router are folded by another (without
    refresh()), as they are by a freshly opened router."""
    opts = surreal.options(sync_delay_s=3600.0)
    with AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as first, \
            AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as second:
        first.record(agent_id="a", task_type="code", success=True)
        first.review("a", "code", approved=True)
        first.signal("b", "code", "user_corrected")
        second.projection.catch_up()
        assert second.trust("a", "code") == first.trust("a", "code")
        assert second.trust_layer.book.counts("b", "code").rejections == 1
        with AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as fresh:
            assert view(fresh) == view(second) == view(first)


def test_the_lifecycle_job_reaches_other_routers(surreal: Target) -> None:
    """One process runs the weekly decay (and later retires a pair deprecated too
    long); another router folds the marks, and rebuilds after the retirement, without
    refresh(), and holds what a freshly opened router holds."""
    opts = surreal.options(sync_delay_s=3600.0)
    t0 = T0
    with AgentRouter(agents=["good", "bad"], store=surreal.url, store_options=opts) as job, \
            AgentRouter(agents=["good", "bad"], store=surreal.url, store_options=opts) as other:
        seed_good_and_bad(job)  # 'good' succeeds 25 times, 'bad' fails twice, at T0
        other.projection.catch_up()
        before = other.trust("good", "code")
        assert job.decay(now=t0 + timedelta(days=8)).decayed == 2
        other.projection.catch_up()
        assert other.trust("good", "code") == job.trust("good", "code") != before
        assert other.trust("bad", "code").tier == "deprecated"
        report = job.decay(now=t0 + timedelta(days=8 + 35))
        assert report.retired == [("bad", "code")]
        other.projection.catch_up()
        assert other.book.get("bad", "code") is None
        with AgentRouter(agents=["good", "bad"], store=surreal.url,
                         store_options=opts) as fresh:
            assert view(other) == view(fresh) == view(job)

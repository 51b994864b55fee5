"""Following the log by the writers' counters: no stamp decides what a router has seen.

Stamps from a clock that stepped back, commits that became visible long after their
stamps, feedback rows likewise: every router folds every row exactly once, and holds
what a freshly opened router holds. (The scenarios with OS processes, restarts and the
cache are in test_convergence_processes.py.)
"""

from __future__ import annotations

import threading

import pytest
from router_views import view
from surreal_fixtures import Target

from trustroute import AgentRouter
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import Store, executions
from trustroute.profiles.store.executions import Origin
from trustroute.router.frontier import Frontier

AGENTS = ["a", "b", "c"]
STILL = {"sync_delay_s": 3600.0}  # no background looks: the test looks itself


def total(router: AgentRouter) -> int:
    return sum(p.executions_total for p in router.profiles())


def test_the_frontier_counts_each_number_once_and_settles_ranges() -> None:
    frontier = Frontier()
    assert frontier.add(Origin("w", 2)) and not frontier.add(Origin("w", 2))
    assert frontier.hw.get("w", 0) == 0 and frontier.has(Origin("w", 2))
    assert frontier.add(Origin("w", 1))
    assert frontier.hw["w"] == 2 and not frontier.above  # 1 and 2: contiguous
    assert frontier.add(Origin("w", 5))
    assert frontier.behind({"w": 6, "v": 1, "u": 0}) == [("w", 2, 6), ("v", 0, 1)]
    frontier.settle("w", 4)  # 3 and 4 fetched (or deleted): 5 was folded before
    assert frontier.hw["w"] == 5 and not frontier.above
    assert frontier.has(None)  # rows of stores older than the counters: the scan's
    assert Frontier.load(frontier.export()).export() == frontier.export()


def test_the_frontier_counts_the_rows_numbered_beyond_it() -> None:
    """What a cached projection is checked with: rows the counters number and it lacks."""
    frontier = Frontier({"w": 3}, {"w": [5]})
    assert frontier.unfolded({"w": 5}) == 1  # w's 4
    assert frontier.unfolded({"w": 6, "v": 2}) == 2 + 2  # w's 4 and 6; all of v's
    assert frontier.unfolded({"w": 4}) is None  # claims w's row 5, never numbered
    assert Frontier({"w": 3}).unfolded({"w": 2}) is None  # claims w's row 3
    assert frontier.unfolded({}) is None
    assert Frontier().unfolded({}) == 0


def test_a_clock_stepped_back_loses_no_row(surreal: Target) -> None:
    """The database clock steps back 20 s between two bursts of 10: the writer and a
    follower hold all 20, rows and feedback, like a freshly opened router."""
    server, opts = surreal.fixture, surreal.options(**STILL)
    with AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as writer, \
            AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as follower:
        for n in range(10):
            writer.record(agent_id=AGENTS[n % 3], task_type="code", success=n % 2 == 0)
        writer.review("a", "code", approved=True)
        follower.projection.catch_up()
        server.shift_clock(-20.0)
        try:
            for n in range(10):
                writer.record(agent_id=AGENTS[n % 3], task_type="code", success=True)
            writer.signal("b", "code", "user_corrected")
            assert follower.projection.catch_up() == 10
        finally:
            server.shift_clock(0.0)
        assert total(writer) == total(follower) == 20
        with AgentRouter(agents=AGENTS, store=surreal.url, store_options=opts) as fresh:
            assert total(fresh) == 20
            assert view(writer) == view(follower) == view(fresh)


def test_a_commit_visible_long_after_its_stamp_is_followed(
        surreal_concurrent: Target) -> None:
    """A batch stamped at its start commits 1.5 s later, while another router keeps
    writing newer rows that the follower folds: the batch is folded once it commits,
    whatever its stamps."""
    server, opts = surreal_concurrent.fixture, surreal_concurrent.options(**STILL)
    url = surreal_concurrent.url
    batch = [ExecutionRecord(agent_id="b", task_type="code", success=True)
             for _ in range(300)]
    with AgentRouter(agents=AGENTS, store=url, store_options=opts) as slow, \
            AgentRouter(agents=AGENTS, store=url, store_options=opts) as quick, \
            AgentRouter(agents=AGENTS, store=url, store_options=opts) as follower:
        server.delay_commits(1.5, count=1, containing="INSERT INTO execution")
        writing = threading.Thread(target=slow.record_many, args=(batch,))
        writing.start()
        newer = folded = 0
        while writing.is_alive():  # newer rows, stamped and visible before the batch
            quick.record(agent_id="a", task_type="code", success=True)
            newer += 1
            folded += follower.projection.catch_up()
        writing.join()
        folded += follower.projection.catch_up()
        assert newer > 10  # the follower folded many rows stamped after the batch's
        assert folded == newer + 300 == total(follower) == quick.store.executions.count()
        with AgentRouter(agents=AGENTS, store=url, store_options=opts) as fresh:
            assert view(follower) == view(fresh)


def test_embedded_a_clock_stepped_back_half_a_second_loses_nothing(
        kv_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedded, one process writes: records stamped 0.5 s before the ones it already
    folded (the engine's clock stepped back; here its time::now() is shifted) are
    folded by the writer itself, and by a reopened router."""
    with AgentRouter(agents=AGENTS, store=kv_url) as router:
        for n in range(10):
            router.record(agent_id=AGENTS[n % 3], task_type="code", success=True)
        monkeypatch.setattr(executions, "RECORD_ONE", executions.RECORD_ONE.replace(
            "time::now()", "(time::now() - 500ms)"))
        for n in range(10):
            router.record(agent_id=AGENTS[n % 3], task_type="code", success=n % 2 == 0)
        assert total(router) == router.store.executions.count() == 20
        held = view(router)
        router.refresh()
        assert view(router) == held
    with AgentRouter(agents=AGENTS, store=kv_url) as reopened:
        assert view(reopened) == held


def test_rows_of_a_writer_read_by_range_on_the_index(surreal: Target) -> None:
    """The follower's fetch is a key range on (writer, wseq): the plan names the index."""
    with Store(surreal.url, **surreal.options()) as store:
        plan = store.run("SELECT * FROM execution WHERE writer = $w AND wseq > $a "
                         "AND wseq <= $b EXPLAIN;", {"w": "x", "a": 1, "b": 5})[0]
        assert any(step.get("operation") == "Iterate Index" and
                   step["detail"]["plan"]["index"] == "execution_writer" for step in plan)

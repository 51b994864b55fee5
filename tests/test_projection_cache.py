"""The cached projection: a router opens from it when it verifies against the log, and
reads the whole log when it does not; either way it holds exactly what the log says."""

from __future__ import annotations

import gc
import logging
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from learning_worker import route_and_judge
from router_views import view
from surreal_fixtures import Target

from trustroute import AgentRouter
from trustroute.profiles.profile import ProfileSettings
from trustroute.profiles.recency import RecencySettings
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import Store
from trustroute.profiles.store.projections import ProjectionRepository

AGENTS = ["a", "b", "c"]
QUICK: dict[str, float] = {}  # (the look-back this once set is gone: no stamps decide)
MISMATCH = "does not match the log"


def fill(url: str, n: int = 120) -> dict[tuple[str, str], Any]:
    """Record ``n`` outcomes, a review and a signal; close (writing the cache)."""
    with AgentRouter(agents=AGENTS, store=url, seed=3, store_options=QUICK) as router:
        for i in range(n):
            decision = router.select(f"t{i % 3}")
            router.record(decision, success=i % 4 != 0, quality=0.3 + (i % 7) / 10)
        router.review("a", "t0", approved=True)
        router.signal("b", "t1", "user_corrected")
        time.sleep(0.2)  # everything settles before the cache is written at close()
        router.record(agent_id="c", task_type="t2", success=True)  # one row after it
        return view(router)


def test_a_router_opens_from_the_cache_and_equals_one_that_read_the_log(
        kv_url: str, caplog: pytest.LogCaptureFixture) -> None:
    learned = fill(kv_url)
    with AgentRouter(agents=AGENTS, store=kv_url, store_options=QUICK) as router:
        head = (router.store.repository(ProjectionRepository).read() or ({},))[0]
        assert head["executions"] >= 120  # the cache covers the settled rows
        assert head["people"] == 2
        with caplog.at_level(logging.INFO):
            cached = view(router)
        router.refresh()  # read the whole log
        assert view(router) == cached == learned
    assert MISMATCH not in caplog.text


@pytest.mark.parametrize("table", ["execution", "trust_feedback"])
def test_a_cache_that_does_not_match_the_log_is_not_used(
        kv_url: str, caplog: pytest.LogCaptureFixture, table: str) -> None:
    """Rows of the log deleted behind the cache's back (executions, or what people said):
    the router reads the whole log, and shows it."""
    fill(kv_url)
    with AgentRouter(agents=AGENTS, store=kv_url, store_options=QUICK) as router:
        said = router.store.run("SELECT count() AS n FROM trust_feedback GROUP ALL;")[0][0]["n"]
        gone = 5 if table == "execution" else 1
        router.store.run("DELETE (SELECT VALUE id FROM type::table($t) LIMIT $k);",
                         {"t": table, "k": gone})  # the log changed behind the cache's back
        router.projection.stop()
    with caplog.at_level(logging.INFO), \
            AgentRouter(agents=AGENTS, store=kv_url, store_options=QUICK) as router:
        executions = 121 - gone if table == "execution" else 121
        assert sum(p.executions_total for p in router.profiles()) == executions
        assert router.store.executions.count() == executions
        from_cache_or_not = view(router)
        router.refresh()
        assert view(router) == from_cache_or_not
        left = router.store.run("SELECT count() AS n FROM trust_feedback GROUP ALL;")[0][0]["n"]
        assert left == (said if table == "execution" else said - 1) and said >= 1
    assert MISMATCH in caplog.text


def test_a_cache_folded_with_another_window_size_is_not_used(kv_url: str) -> None:
    fill(kv_url)
    narrow = ProfileSettings(recency=RecencySettings(window_size=5))
    with AgentRouter(agents=AGENTS, store=kv_url, settings=narrow,
                     store_options=QUICK) as router:
        assert all(len(s.window) == min(5, s.executions_total) for s in router.book)
        assert max(len(s.window) for s in router.book) == 5
        cached = view(router)
        router.refresh()
        assert view(router) == cached
    with AgentRouter(agents=AGENTS, store=kv_url, store_options=QUICK) as router:
        assert max(len(s.window) for s in router.book) > 5  # the wide window is back


def test_the_cache_is_written_every_projection_every_rows_without_close(kv_url: str) -> None:
    """A process that is killed never reaches close(): it writes the cache every
    ``store.projection_every`` folded rows anyway, so the next open folds at most about
    that many rows on top of it."""
    with AgentRouter(agents=AGENTS, store=kv_url,
                     store_options={"projection_every": 10}) as router:
        cache = router.store.repository(ProjectionRepository)
        for i in range(9):
            router.record(agent_id=AGENTS[i % 3], task_type="t", success=True)
        assert cache.read() is None
        for i in range(16):
            router.record(agent_id=AGENTS[i % 3], task_type="t", success=True)
        head = (cache.read() or ({},))[0]
        assert head["executions"] == 20  # written at the 10th and the 20th row


WAITING = {"wait_s": 3600, "default": "ignore", "keys": {"judge": {"weight": 2}}}


def rounded(value: Any) -> Any:
    """A view with floats to 9 places: expertise is kept as running sums, and a verdict
    amends them in place (x - old + new), which a fresh fold matches to the last bits."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value
OPENED = "opened from the cached projection"


def judged(url: str, **store_options: Any) -> tuple[list[str], dict[tuple[str, str], Any]]:
    """Runs awaiting verdicts, verdicts on some (two keys, a mind changed, one before
    its execution); close (writing the cache). Returns the record ids and the view."""
    with AgentRouter(agents=AGENTS, store=url, seed=3, feedback=WAITING,
                     store_options=store_options) as router:
        ids = []
        for i in range(60):
            decision = router.select(f"t{i % 3}")
            if i == 59:  # a verdict on a decision whose execution is not recorded yet
                router.feedback(decision.decision_id, score=0.25, key="judge")
            quality = 0.5 + (i % 5) / 10 if i % 4 == 0 else None
            ids.append(router.record(decision, success=i % 7 != 0, quality=quality).record_id)
        for i in range(0, 60, 3):
            router.feedback(ids[i], approved=i % 2 == 0)
        router.feedback(ids[3], approved=True)  # the user changes their mind
        router.feedback(ids[6], score=0.9, key="judge")
        assert sum(p.pending for p in router.profiles()) > 0
        return ids, view(router)


def test_a_store_with_verdicts_and_pending_runs_opens_from_the_cache(
        kv_url: str, caplog: pytest.LogCaptureFixture) -> None:
    ids, learned = judged(kv_url)
    cache = lambda r: (r.store.repository(ProjectionRepository).read() or ({},))[0]  # noqa: E731
    with caplog.at_level(logging.INFO), \
            AgentRouter(agents=AGENTS, store=kv_url, feedback=WAITING) as router:
        assert rounded(view(router)) == rounded(learned)
        generation = cache(router)["generation"]
        # verdicts after the cache was written, on executions inside it: a pending run
        # settled, a quality given at record time replaced, a verdict changed
        router.feedback(ids[1], approved=True)
        router.feedback(ids[4], score=0.1, key="judge")
        router.feedback(ids[6], approved=True)
        amended = rounded(view(router))
        assert amended != rounded(learned)
    assert OPENED in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO), \
            AgentRouter(agents=AGENTS, store=kv_url, feedback=WAITING) as router:
        assert cache(router)["generation"] == generation  # verdicts alone wrote no cache
        assert rounded(view(router)) == amended  # the old cache, the verdicts on top
        assert OPENED in caplog.text
        router.refresh()  # the whole log
        assert rounded(view(router)) == amended
    assert "reading the whole log" not in caplog.text


def test_reading_a_profile_as_of_a_later_moment_settles_nothing(kv_url: str) -> None:
    later = datetime(2030, 1, 1, tzinfo=UTC)
    with AgentRouter(agents=AGENTS, store=kv_url, feedback=WAITING) as router:
        for _ in range(3):
            router.record(agent_id=AGENTS[0], task_type="t", success=True)  # awaiting
        assert router.profile(AGENTS[0], "t", now=later).pending == 3
        assert router.profile(AGENTS[0], "t").pending == 3  # the read changed nothing
    with AgentRouter(agents=AGENTS, store=kv_url, feedback=WAITING) as router:
        assert router.profile(AGENTS[0], "t").pending == 3  # from the cache
        router.refresh()
        assert router.profile(AGENTS[0], "t").pending == 3  # from the log: the same


def test_a_cache_folded_under_another_feedback_policy_is_not_used(
        kv_url: str, caplog: pytest.LogCaptureFixture) -> None:
    judged(kv_url)
    other = {**WAITING, "keys": {"judge": {"weight": 1}}}
    with caplog.at_level(logging.INFO), \
            AgentRouter(agents=AGENTS, store=kv_url, feedback=other) as router:
        opened = rounded(view(router))
        router.refresh()
        assert rounded(view(router)) == opened
    assert "another feedback policy" in caplog.text and OPENED not in caplog.text


def test_runs_whose_wait_ended_while_the_store_was_closed_are_settled_on_open(
        kv_url: str) -> None:
    policy = {"wait_s": 0.5, "default": 0.3}
    with AgentRouter(agents=AGENTS, store=kv_url, feedback=policy) as router:
        for _ in range(4):
            router.record(agent_id="a", task_type="t", success=True)
        assert router.profile("a", "t").pending == 4
    time.sleep(0.6)
    with AgentRouter(agents=AGENTS, store=kv_url, feedback=policy) as router:
        profile = router.profile("a", "t")
        assert (profile.pending, profile.avg_quality) == (0, pytest.approx(0.3))


def test_a_server_store_with_verdicts_opens_from_the_cache_after_a_restart(
        surreal: Target, caplog: pytest.LogCaptureFixture) -> None:
    """The cache (with its feedback state) is read back from a server that restarted,
    and verdicts given after the restart land on top of it, as a full fold says."""
    server, options = surreal.fixture, surreal.options()
    ids, learned = judged(surreal.url, **options)
    server.stop()
    server.start()
    with caplog.at_level(logging.INFO), AgentRouter(
            agents=AGENTS, store=surreal.url, feedback=WAITING,
            store_options=options) as router:
        assert rounded(view(router)) == rounded(learned)
        router.feedback(ids[1], approved=True)  # settles a pending run
        router.feedback(ids[3], approved=False)  # the user changes their mind again
        amended = rounded(view(router))
        assert amended != rounded(learned)
    assert OPENED in caplog.text
    server.stop()
    server.start()
    with AgentRouter(agents=AGENTS, store=surreal.url, feedback=WAITING,
                     store_options=options) as router:
        assert rounded(view(router)) == amended
        router.refresh()  # the whole log
        assert rounded(view(router)) == amended


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_a_rescue_after_a_restart_charges_the_failure_before_it(
        where: str, kv_url: str, surreal: Target) -> None:
    """The rescue tracker is part of the cached projection: a task failed before a
    restart and rescued after it is one contradiction, as a fold of the log says."""
    url, options = (kv_url, {}) if where == "embedded" else (surreal.url, surreal.options())

    def x_contradictions(rescue: bool = False) -> int:
        with AgentRouter(agents=["x", "y"], store=url, store_options=options) as router:
            if rescue:
                router.record(agent_id="y", task_type="t", success=True,
                              metadata={"task_id": "T1", "attempt": 2})
            return router.trust_layer.book.counts("x", "t").contradictions

    with AgentRouter(agents=["x", "y"], store=url, store_options=options) as router:
        router.record(agent_id="x", task_type="t", success=False,
                      metadata={"task_id": "T1", "attempt": 1})
    assert x_contradictions(rescue=True) == 1  # opened from the cache, then rescued
    assert x_contradictions() == 1  # the cache it wrote at close says so too
    with AgentRouter(agents=["x", "y"], store=url, store_options=options) as router:
        router.refresh()  # the log
        assert router.trust_layer.book.counts("x", "t").contradictions == 1


def test_with_verdicts_a_router_from_the_cache_scores_as_one_that_read_the_log(
        kv_url: str) -> None:
    """Verdicts on runs outside the windows: folded one by one after a whole-log read,
    they left the strategy's evidence other than the cache's (scores 0.603 and 0.608)."""
    options: dict[str, Any] = {"agents": ["a", "b", "c", "d"], "store": kv_url, "seed": 0,
                               "feedback": {"wait_s": 3600, "default": "outcome"}}
    with AgentRouter(**options) as router:
        route_and_judge(router, 300, {"a": 0.9, "b": 0.6, "c": 0.5, "d": 0.3})
    scores = []
    for read_the_log in (False, True):
        with AgentRouter(**options) as router:
            if read_the_log:
                router.refresh()
            scores.append([(c.agent_id, round(c.score, 9))
                           for c in router.select("code").candidates])
    assert scores[0] == scores[1]


@pytest.mark.parametrize("enabled", [True, False])
def test_opening_leaves_the_garbage_collector_as_it_was(kv_url: str, enabled: bool) -> None:
    """A rebuild pauses Python's cyclic collector (it makes many long-lived objects) and
    restores it, also when the host had it off."""
    fill(kv_url, n=12)
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with AgentRouter(agents=AGENTS, store=kv_url) as router:
            assert gc.isenabled() is enabled
            router.refresh()  # the whole log
            assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_a_server_store_opens_from_the_cache_across_a_clock_step(
        surreal: Target, caplog: pytest.LogCaptureFixture) -> None:
    """The check never reads a stamp: with the server's clock stepped back 20 s after the
    cache was written and rows stored since, a router opens from the cache, folds those
    rows by their writers' counters, and holds what a full fold holds."""
    server, options = surreal.fixture, surreal.options()
    with AgentRouter(agents=AGENTS, store=surreal.url, store_options=options) as r:
        for i in range(31):  # the cache is written at close
            r.record(agent_id=AGENTS[i % 3], task_type=f"t{i % 2}", success=i % 4 != 0)
    server.shift_clock(-20.0)
    try:
        with Store(surreal.url, **options) as store:  # rows and no new cache
            store.executions.record_many([ExecutionRecord(
                agent_id=AGENTS[i % 3], task_type="t1", success=True, quality=0.4)
                for i in range(10)])
        with caplog.at_level(logging.INFO), AgentRouter(
                agents=AGENTS, store=surreal.url, store_options=options) as router:
            assert sum(p.executions_total for p in router.profiles()) == 31 + 10
            opened = rounded(view(router))  # sums folded in another order: ~1e-16 apart
            router.refresh()  # the whole log
            assert rounded(view(router)) == opened
    finally:
        server.shift_clock(0.0)
    assert "opened from the cached projection (31 executions), then folded 10" in caplog.text
    assert MISMATCH not in caplog.text

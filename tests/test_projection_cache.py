"""The cached projection: a router opens from it when it verifies against the log, and
reads the whole log when it does not; either way it holds exactly what the log says."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from trustroute import AgentRouter
from trustroute.profiles.profile import ProfileSettings
from trustroute.profiles.recency import RecencySettings
from trustroute.profiles.store.projections import ProjectionRepository

AGENTS = ["a", "b", "c"]
MOMENT = datetime(2030, 1, 1, tzinfo=UTC)
QUICK: dict[str, float] = {}  # (the look-back this once set is gone: no stamps decide)
MISMATCH = "does not match the log"


def view(router: AgentRouter) -> dict[tuple[str, str], Any]:
    """Per pair: profile at one moment, window with seqs, trust counts."""
    return {(s.agent_id, s.task_type): (
        router.profile(s.agent_id, s.task_type, now=MOMENT).model_dump(),
        [(e.timestamp, e.quality, e.success, e.seq) for e in s.window],
        router.trust_layer.book.counts(s.agent_id, s.task_type)) for s in router.book}


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


def test_a_cache_that_does_not_match_the_log_is_not_used(
        kv_url: str, caplog: pytest.LogCaptureFixture) -> None:
    fill(kv_url)
    with AgentRouter(agents=AGENTS, store=kv_url, store_options=QUICK) as router:
        router.store.run("DELETE (SELECT VALUE id FROM execution WHERE task_type = 't0' "
                         "LIMIT 5);")  # the log changed behind the cache's back
        router.projection.stop()
    with caplog.at_level(logging.INFO), \
            AgentRouter(agents=AGENTS, store=kv_url, store_options=QUICK) as router:
        assert sum(p.executions_total for p in router.profiles()) == 121 - 5
        assert router.store.executions.count() == 121 - 5
        from_cache_or_not = view(router)
        router.refresh()
        assert view(router) == from_cache_or_not
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

"""The cached projection against the whole log across OS processes, on the test server:
a worker process records executions and late verdicts and closes (writing the cache);
then another may give more verdicts on its oldest runs, or the wait for verdicts of its
last runs may end while no router is open. A router opened from the cache and one that
read the whole log (``refresh()``) hold the same profiles and score every agent the
same: either way the strategy is derived from the final book (verdicts folded one by
one, after a whole-log read or on top of the cache, left other scores)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from surreal_fixtures import Target

from trustroute import AgentRouter

WORKER = Path(__file__).with_name("learning_worker.py")
RUNS = 300

pytestmark = pytest.mark.slow


def run_worker(surreal: Target, *args: str) -> None:
    """Another OS process (tests/learning_worker.py): ``workload WAIT_S RUNS`` or
    ``verdicts WAIT_S COUNT``."""
    proc = subprocess.run([sys.executable, str(WORKER), surreal.url, surreal.database,
                           *args], env=surreal.env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0 and proc.stdout.split() == ["done"], proc.stderr[-2000:]


def scores(router: AgentRouter) -> list[tuple[str, float]]:
    """Every candidate's score for ``code``, best first (the strategy's, same seed)."""
    return [(c.agent_id, round(c.score, 9)) for c in router.select("code").candidates]


@pytest.mark.parametrize(("wait_s", "late"), [(3600, 0), (3600, 40), (1, 0)],
                         ids=["verdicts-in-workload", "more-verdicts-later",
                              "waits-end-while-closed"])
def test_a_router_from_the_cache_scores_as_one_that_read_the_whole_log(
        surreal: Target, caplog: pytest.LogCaptureFixture, wait_s: int, late: int) -> None:
    run_worker(surreal, "workload", str(wait_s), str(RUNS))
    if late:  # verdicts from a process that records nothing (its close writes no cache)
        run_worker(surreal, "verdicts", str(wait_s), str(late))
    if wait_s < 60:
        time.sleep(wait_s + 0.5)  # every run's wait is over before either router opens
    options = {"agents": ["a", "b", "c", "d"], "seed": 0, "store": surreal.url,
               "feedback": {"wait_s": wait_s, "default": "outcome"},
               "store_options": surreal.options()}  # as the worker's
    opened = []
    for read_the_log in (False, True):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="trustroute"), \
                AgentRouter(**options) as router:
            from_cache = f"opened from the cached projection ({RUNS} executions)" in \
                caplog.text
            if read_the_log:
                router.refresh()  # documented: always reads the whole log
            profiles = [(p.agent_id, p.executions_total, p.pending, round(p.avg_quality, 9))
                        for p in router.profiles("code")]
            assert sum(p[1] for p in profiles) == RUNS
            opened.append((from_cache, profiles, scores(router)))
    (cached, profiles, by_cache), (_, profiles_log, by_log) = opened
    assert cached  # the first router really started from the worker's cache
    assert profiles == profiles_log  # the verdicts and ended waits settled the same runs
    assert by_cache == by_log  # ... and the strategy scores every agent alike

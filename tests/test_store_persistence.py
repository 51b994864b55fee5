"""Persistence of the embedded surrealkv store: reopen, SIGKILL, the process lock, versions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trustroute.profiles.store import SchemaVersionError, Store, StoreLockedError, parse_store_url
from trustroute.profiles.store.connection import Connection
from trustroute.profiles.store.lock import PathLock
from trustroute.profiles.store.schema import SCHEMA_VERSION
from trustroute.router import AgentRouter

ROOT = Path(__file__).resolve().parents[1]


def python(code: str, *args: str) -> subprocess.Popen[str]:
    """Start ``python -c code`` in the project with ``args``, stdout piped as text."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def view(router: AgentRouter) -> tuple[dict[tuple[str, str], tuple[object, ...]], dict[str, int]]:
    """Everything the book holds, in comparable form."""
    states = {
        (s.agent_id, s.task_type): (
            s.executions_total, s.executions_successful, round(s.quality_sum, 9),
            round(s.latency_sum_ms, 6), round(s.cost_sum, 9), s.cost_count, s.last_updated,
            tuple((round(e.timestamp, 6), e.quality, e.success, e.seq) for e in s.window),
        )
        for s in router.book
    }
    clocks = {t: router.book.clock(t) for t in router.book.task_types()}
    return states, clocks


def test_profiles_windows_and_clocks_survive_reopen(kv_url: str) -> None:
    with AgentRouter(agents=["a", "b"], store=kv_url, seed=0) as r:
        for i in range(130):  # more than the 100-entry window for one pair
            r.record(agent_id="ab"[i % 3 == 0], task_type=("code", "math")[i % 2],
                     success=i % 4 != 0, quality=(i % 10) / 10, latency_ms=float(i),
                     cost=0.01 * i if i % 5 == 0 else None)
        before = view(r)
        profile_before = r.profile("a", "code")
    with AgentRouter(agents=["a", "b"], store=kv_url, seed=0) as r:
        assert view(r) == before
        assert r.store.executions.count() == 130
        assert r.profile("a", "code").expertise == pytest.approx(profile_before.expertise)
        # the clock continues where it stopped
        r.record(agent_id="a", task_type="code", success=True)
        assert r.book.clock("code") == before[1]["code"] + 1


CHILD_WRITER = """
import sys
from trustroute.router import AgentRouter
with AgentRouter(agents=["a", "b"], store=sys.argv[1]) as r:
    i = 0
    while True:
        rec = r.record(agent_id="ab"[i % 2], task_type="code", success=i % 3 != 0)
        print(rec.record_id, flush=True)
        i += 1
"""


def test_sigkilled_writer_loses_no_returned_record(kv_url: str) -> None:
    child = python(CHILD_WRITER, kv_url)
    assert child.stdout is not None
    acknowledged: list[str] = []
    try:
        while len(acknowledged) < 60:
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"writer died early: {child.stderr.read() if child.stderr else ''}")
            acknowledged.append(line.strip())
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    with AgentRouter(agents=["a", "b"], store=kv_url) as r:  # lock died with the process
        assert r.store.executions.stored_ids(acknowledged) == set(acknowledged)
        total = r.store.executions.count()
        assert total >= len(acknowledged)
        profiles = r.profiles("code")
        assert sum(p.executions_total for p in profiles) == total
        assert r.book.clock("code") == total


CHILD_OPENER = """
import sys
from trustroute.profiles.store import Store, StoreLockedError
try:
    Store(sys.argv[1], lock_wait_s=float(sys.argv[2]))
except StoreLockedError as exc:
    print(exc)
    sys.exit(3)
print("opened")
"""


def test_second_process_gets_a_clear_lock_error(kv_url: str) -> None:
    with Store(kv_url) as store:
        child = python(CHILD_OPENER, kv_url, "0.5")
        out, err = child.communicate(timeout=60)
        assert child.returncode == 3, (out, err)
        assert str(store.location.path) in out and "(waited 0.5 s)" in out
        assert "ws://" in out
        assert "server" in out
    child = python(CHILD_OPENER, kv_url, "0")  # released on close: the next process may open it
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and "opened" in out


def test_an_open_waits_for_a_holder_that_lets_go(kv_url: str) -> None:
    """A `trustroute` command reading the store holds it for a moment: an app that
    (re)starts then waits for it (store.lock_wait_s) instead of failing."""
    store = Store(kv_url)
    try:
        child = python(CHILD_OPENER, kv_url, "30")
        time.sleep(1.0)  # the child is waiting for the lock
    finally:
        store.close()
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0 and "opened" in out, (out, err)


def test_same_process_second_open_is_refused_too(kv_url: str) -> None:
    with Store(kv_url), pytest.raises(StoreLockedError, match="already open"):
        Store(kv_url)


def test_a_newer_schema_version_is_refused(kv_url: str) -> None:
    with AgentRouter(agents=["a"], store=kv_url) as r:
        r.record(agent_id="a", task_type="code", success=True)
        r.store.run("UPSERT meta:schema SET version = $v;", {"v": SCHEMA_VERSION + 1})
    with pytest.raises(SchemaVersionError, match="upgrade trustroute") as info:
        Store(kv_url)
    assert f"version {SCHEMA_VERSION + 1}" in str(info.value)
    # the refusal released the lock and left the data as it was
    location = parse_store_url(kv_url)
    conn = Connection(location)
    lock = PathLock(location.path)  # type: ignore[arg-type]
    lock.acquire()
    try:
        conn.open()
        assert conn.run("SELECT VALUE version FROM meta:schema;")[0] == [SCHEMA_VERSION + 1]
        assert conn.run("SELECT VALUE [agent_id, task_type, success] FROM execution;"
                        )[0] == [["a", "code", True]]
    finally:
        conn.close()
        lock.release()


def test_schema_version_is_recorded_and_reopening_is_idempotent(kv_url: str) -> None:
    with Store(kv_url) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.run("SELECT VALUE version FROM meta:schema;")[0] == [SCHEMA_VERSION]
    with Store(kv_url) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.run("SELECT count() AS n FROM meta GROUP ALL;")[0] == [{"n": 1}]

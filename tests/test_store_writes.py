"""Writes: hostile ids verbatim, idempotent retries, exact bulk imports, concurrent record()."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from trustroute.profiles import ExecutionRecord, ProfileSettings, RecencySettings
from trustroute.profiles.store import DuplicateRecord, QueryFailed, Store
from trustroute.profiles.store.window_format import parse_window, window_entry
from trustroute.router import AgentRouter

HOSTILE = [
    "it's",
    'say "hi"',
    "x'; DELETE execution; --",
    "a`b`c ⟨⟩ $param {}",
    "ünïcødé 🤖 名前",
    "back\\slash\nnew line\ttab",
    "z" * 256,
]
T0 = datetime(2025, 3, 1, tzinfo=UTC)


def rec(agent: str = "a", task: str = "code", *, i: int = 0, **fields: object) -> ExecutionRecord:
    base: dict[str, object] = {"agent_id": agent, "task_type": task, "success": i % 3 != 0,
                               "quality": (i % 7) / 7, "latency_ms": float(i),
                               "timestamp": T0 + timedelta(seconds=i)}
    base.update(fields)
    return ExecutionRecord(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_ids_are_stored_and_read_back_verbatim(kv_url: str, value: str) -> None:
    with AgentRouter(agents=[value, "plain"], store=kv_url) as r:
        r.record(agent_id=value, task_type=value, success=True, record_id=value,
                 metadata={"note": value})
        d = r.select(value)
        r.record(d, success=False)
    with AgentRouter(agents=[value, "plain"], store=kv_url) as r:
        assert r.store.executions.count() == 2
        assert r.profile(value, value).executions_total + \
            r.profile("plain", value).executions_total == 2
        rows = list(r.store.executions.iter_executions(agent_id=value, task_type=value))
        stored = next(row for row in rows if row["record_id"] == value)
        assert stored["agent_id"] == value and stored["task_type"] == value
        assert stored["metadata"] == {"note": value}
        assert r.book.clock(value) == 2
        assert {s.agent_id for s in r.book.for_task_type(value)} <= {value, "plain"}


def test_ids_longer_than_256_are_rejected_before_the_store(router: AgentRouter) -> None:
    with pytest.raises(ValueError, match="agent_id is 257 characters"):
        router.record(agent_id="x" * 257, task_type="code", success=True)
    with pytest.raises(ValueError, match="record_id is 257"):
        router.record(agent_id="a", task_type="code", success=True, record_id="r" * 257)
    assert router.store.executions.count() == 0


def test_the_store_asserts_too(router: AgentRouter) -> None:
    # a record that slipped past validation is still refused by the schema's ASSERTs
    bad = rec().model_copy(update={"quality": 1.5})
    with pytest.raises(QueryFailed):
        router.store.executions.record(bad)
    with pytest.raises(QueryFailed):
        router.store.executions.record_many([rec(i=1), bad])
    assert router.store.executions.count() == 0
    assert router.store.run("SELECT VALUE id FROM profile;")[0] == []


def test_the_store_refuses_empty_and_overlong_ids(router: AgentRouter) -> None:
    for bad in ("", "x" * 257):
        sneaked = rec().model_copy(update={"agent_id": bad})
        with pytest.raises(QueryFailed, match="agent_id"):
            router.store.executions.record(sneaked)
    assert router.store.executions.count() == 0


def test_retry_with_the_same_record_id_is_stored_once(router: AgentRouter) -> None:
    first = router.record(agent_id="a", task_type="code", success=True, record_id="req-1")
    with pytest.raises(DuplicateRecord, match="req-1"):  # reported, not a fresh record
        router.record(agent_id="a", task_type="code", success=True, record_id="req-1")
    assert router.store.executions.count() == 1
    assert router.profile("a", "code").executions_total == 1
    assert router.store.executions.record(first) is None
    assert router.record_many([first, first]) == 0
    assert router.store.executions.count() == 1


def test_record_many_returns_seqs_and_skips_duplicates_exactly(router: AgentRouter) -> None:
    stored = rec("a", "code", i=100)
    assert router.store.executions.record(stored) == 1
    batch = [rec("a", "code", i=1), rec("b", "math", i=2), rec("b", "code", i=3)]
    batch += [batch[0], stored, rec("a", "math", i=4)]  # in-batch repeat, stored id
    seqs = router.store.executions.record_many(batch)
    assert seqs == [2, 1, 3, None, None, 2]
    # re-importing writes nothing
    assert router.store.executions.record_many(batch) == [None] * 6
    assert router.store.executions.count() == 5
    assert router.store.executions.record_many([]) == []


def test_bulk_import_matches_one_by_one_records(tmp_path: object) -> None:
    records = [rec("abc"[i % 3], ("code", "math")[i % 2], i=i,
                   cost=0.25 if i % 4 == 0 else None) for i in range(330)]
    with AgentRouter(agents=["a", "b", "c"], store="mem://") as one:
        for r in records:
            one.record(r)
        expected = {(p.agent_id, p.task_type): p for p in one.profiles()}
        windows = {(s.agent_id, s.task_type): list(s.window) for s in one.book}
        clocks = {t: one.book.clock(t) for t in ("code", "math")}
    with AgentRouter(agents=["a", "b", "c"], store="mem://") as bulk:
        assert bulk.record_many(records[:150], batch_size=64) == 150
        assert bulk.record_many(records, batch_size=64) == 180  # overlaps the first import
        got = {(p.agent_id, p.task_type): p for p in bulk.profiles()}
        assert got.keys() == expected.keys()
        for key, profile in expected.items():
            assert got[key].executions_total == profile.executions_total
            assert got[key].executions_successful == profile.executions_successful
            assert got[key].avg_quality == pytest.approx(profile.avg_quality)
            assert got[key].avg_cost == pytest.approx(profile.avg_cost)
            assert got[key].last_updated == profile.last_updated
        bulk.refresh()  # the stored windows and clocks equal what record() builds
        assert {(s.agent_id, s.task_type): list(s.window) for s in bulk.book} == windows
        assert {t: bulk.book.clock(t) for t in ("code", "math")} == clocks


@pytest.mark.parametrize("window", [1, 5])
def test_small_windows_stay_exact_through_trims_and_reopen(kv_url: str, window: int) -> None:
    settings = ProfileSettings(recency=RecencySettings(window_size=window))
    records = [rec("a", "code", i=i) for i in range(60)]
    with AgentRouter(agents=["a"], store=kv_url, settings=settings) as r:
        for i, r_ in enumerate(records[:25]):
            r.record(r_) if i % 2 else r.record_many([r_])
        r.record_many(records[25:50], batch_size=7)
        for r_ in records[50:]:
            r.record(r_)
        in_memory = list(r.book.get("a", "code").window)  # type: ignore[union-attr]
        assert [e.seq for e in in_memory] == list(range(61 - window, 61))
    with AgentRouter(agents=["a"], store=kv_url, settings=settings) as r:
        assert list(r.book.get("a", "code").window) == in_memory  # type: ignore[union-attr]
        stored = r.store.run("SELECT VALUE recent FROM profile;")[0]
        # every write trims the stored window to the window size
        assert [e.seq for e in parse_window(stored[0])] == list(range(61 - window, 61))


def test_last_updated_is_the_latest_timestamp_not_the_last_written(kv_url: str) -> None:
    late, early = rec(i=500), rec(i=5)
    with AgentRouter(agents=["a"], store=kv_url) as r:
        r.record(late)
        r.record(early)
        r.record_many([rec(i=7), rec(i=6)])
        assert r.profile("a", "code").last_updated == late.timestamp
    with AgentRouter(agents=["a"], store=kv_url) as r:
        assert r.profile("a", "code").last_updated == late.timestamp


def test_concurrent_records_are_all_counted(kv_url: str) -> None:
    agents = ["a", "b", "c", "d"]
    with AgentRouter(agents=agents, store=kv_url, seed=1) as r:
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                for i in range(500):
                    agent = agents[(worker + i) % 4]
                    r.record(agent_id=agent, task_type=("code", "math")[i % 2],
                             success=(worker + i) % 3 != 0)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        expected = {}
        for w in range(8):
            for i in range(500):
                key = (agents[(w + i) % 4], ("code", "math")[i % 2])
                ok = (w + i) % 3 != 0
                total, good = expected.get(key, (0, 0))
                expected[key] = (total + 1, good + ok)
        memory = {(s.agent_id, s.task_type): (s.executions_total, s.executions_successful)
                  for s in r.book}
        assert memory == expected
        assert r.store.executions.count() == 4000
        assert r.book.clock("code") == r.book.clock("math") == 2000
    with AgentRouter(agents=agents, store=kv_url) as r:
        stored = {(s.agent_id, s.task_type): (s.executions_total, s.executions_successful)
                  for s in r.book}
        assert stored == expected
        assert r.book.clock("code") == 2000
        seqs = sorted(e.seq for s in r.book.for_task_type("code") for e in s.window)
        assert len(seqs) == len(set(seqs))  # every seq handed out once


def test_closed_store_says_so() -> None:
    store = Store("mem://")
    store.close()
    store.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        store.executions.count()


def test_window_text_round_trips_exactly() -> None:
    records = [rec(i=3, quality=0.1 + 0.2), rec(i=4, success=False, quality=1 / 3)]
    text = ";".join(f"{window_entry(r)} {seq}" for seq, r in enumerate(records, start=41))
    parsed = parse_window(text)
    assert [(e.timestamp, e.quality, e.success, e.seq) for e in parsed] == [
        (r.timestamp.timestamp(), r.effective_quality, r.success, seq)
        for seq, r in enumerate(records, start=41)
    ]
    assert parse_window("") == [] and parse_window(None) == []


def test_seqs_continue_from_the_stored_clocks_and_skip_nothing(kv_url: str) -> None:
    with Store(kv_url) as store:
        first = rec("a", "code", i=1)
        assert store.executions.record(first) == 1
        assert store.executions.record(first) is None  # a retry does not move the clock
        assert store.executions.record(rec("b", "code", i=2)) == 2
        assert store.executions.record_many([rec("a", "math", i=3), first,
                                             rec("b", "code", i=4)]) == [1, None, 3]
    with Store(kv_url) as store:  # clocks come back from the profiles
        _, clocks = store.executions.load()
        assert clocks == {"code": 3, "math": 1}
        assert store.executions.record(rec("c", "code", i=5)) == 4


def test_a_store_written_with_a_task_clock_table_still_loads_and_counts_on(
        kv_url: str) -> None:
    """Stores written before seqs were numbered by the repository have a task_clock
    table and window text without a leading separator; both are read as before."""
    with Store(kv_url) as store:
        store.run("DEFINE TABLE task_clock SCHEMAFULL; DEFINE FIELD n ON task_clock TYPE int;"
                  " UPSERT task_clock:['code'] SET n = 2;")
        old = [rec("a", "code", i=1), rec("a", "code", i=2)]
        text = ";".join(f"{window_entry(r)} {seq}" for seq, r in enumerate(old, start=1))
        store.run("UPSERT profile:['a', 'code'] SET agent_id = 'a', task_type = 'code',"
                  " executions_total = 2, executions_successful = 1, quality_sum = 0.5,"
                  " latency_sum_ms = 3.0, cost_sum = 0.0, cost_count = 0,"
                  " last_updated = $at, recent = $text;",
                  {"at": old[1].timestamp, "text": text})
    with AgentRouter(agents=["a"], store=kv_url) as r:
        assert r.book.clock("code") == 2
        r.record(rec("a", "code", i=3))
        assert [e.seq for e in r.book.get("a", "code").window] == [1, 2, 3]  # type: ignore[union-attr]
    with AgentRouter(agents=["a"], store=kv_url) as r:
        assert [e.seq for e in r.book.get("a", "code").window] == [1, 2, 3]  # type: ignore[union-attr]
        assert r.profile("a", "code").executions_total == 3


def test_an_older_store_with_a_split_window_loads_and_retires_whole(kv_url: str) -> None:
    """Stores written before 2026-11-23 kept the older part of a window in
    profile_window: it is joined before the profile's own entries, and retiring the pair
    removes it too."""
    from trustroute.profiles.store.trust import TrustRepository

    records = [rec("a", "code", i=i) for i in range(30)]
    with Store(kv_url) as store:
        store.executions.record_many(records[20:])
        older = ";".join(f"{window_entry(r)} {seq}" for seq, r in
                         enumerate(records[:20], start=1))
        store.run("UPSERT profile_window:['a', 'code'] SET recent = $older;",
                  {"older": older})
        store.executions.record(rec("b", "code", i=32))
        states, _ = store.executions.load()
        window = {s.agent_id: s.window for s in states}["a"]
        assert [e.timestamp for e in window] == \
            [r.timestamp.timestamp() for r in records]
        repo = store.repository(TrustRepository)
        history = {"agent_id": "a", "task_type": "code", "frequency": 0.0,
                   "effectiveness": 0.0, "human": 0.5, "composite": 0.1,
                   "tier": "deprecated", "reason": "deleted", "at": T0}
        assert repo.retire("a", "code", history, T0) == 10
        assert store.run("SELECT * FROM profile_window;")[0] == []
        states, _ = store.executions.load()
        assert [(s.agent_id, len(s.window)) for s in states] == [("b", 1)]

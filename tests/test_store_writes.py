"""Writes: hostile ids verbatim, idempotent retries, exact bulk imports, concurrent record()."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from trustroute.profiles import ExecutionRecord, ProfileSettings, RecencySettings
from trustroute.profiles.book import ProfileBook
from trustroute.profiles.store import DuplicateRecord, QueryFailed, Store
from trustroute.profiles.store.executions import LogKey, LogRow
from trustroute.router import AgentRouter

HOSTILE = [
    "it's",
    'say "hi"',
    "x'; DELETE execution; --",
    "a`b`c ⟨⟩ $param {}",
    "ünïcødé 🤖 名前",
    "back\\slash and no-break space",  # controls (newline, tab) are refused
    "z" * 256,
]
T0 = datetime(2025, 3, 1, tzinfo=UTC)


def rec(agent: str = "a", task: str = "code", *, i: int = 0, **fields: object) -> ExecutionRecord:
    base: dict[str, object] = {"agent_id": agent, "task_type": task, "success": i % 3 != 0,
                               "quality": (i % 7) / 7, "latency_ms": float(i),
                               "timestamp": T0 + timedelta(seconds=i)}
    base.update(fields)
    return ExecutionRecord(**base)  # type: ignore[arg-type]


def entries(book: ProfileBook) -> dict[tuple[str, str], list[tuple[float, float, bool, int]]]:
    """Every window of a book, without the log keys (they name one store's write times)."""
    return {(s.agent_id, s.task_type): [(e.timestamp, e.quality, e.success, e.seq)
                                        for e in s.window] for s in book}


def seqs(store: Store) -> dict[str, int]:
    """Each stored record's seq: its place among its task type's executions in log
    order (what every router's book gives it)."""
    placed, _ = ProfileBook().place(store.executions.scan())
    return {record.record_id: seq for record, seq in placed}


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
    bad, good = rec().model_copy(update={"quality": 1.5}), rec(i=1)
    with pytest.raises(QueryFailed):
        router.store.executions.record(bad)
    with pytest.raises(QueryFailed):
        router.store.executions.record_many([good, bad])
    assert router.store.executions.count() == 0
    assert router.store.executions.stored_ids([good.record_id]) == set()  # all or nothing


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


def test_record_many_returns_log_keys_and_skips_duplicates_exactly(
        router: AgentRouter) -> None:
    store = router.store
    stored = rec("a", "code", i=100)
    first = store.executions.record(stored)
    assert first is not None and first.origin is not None
    key = first.key
    assert (key.pos, key.record_id) == (0, stored.record_id)
    batch = [rec("a", "code", i=1), rec("b", "math", i=2), rec("b", "code", i=3)]
    batch += [batch[0], stored, rec("a", "math", i=4)]  # in-batch repeat, stored id
    rows = store.executions.record_many(batch)
    keys = [row and row.key for row in rows]
    # the writer numbers its rows one after another, the batch's in batch order
    assert [row and row.origin for row in rows] == [
        (first.origin.writer, first.origin.wseq + n) if n else None
        for n in (1, 2, 3, 0, 0, 4)]
    # one write of the four new records, in batch order, after the stored one
    assert [k and (k.pos, k.record_id) for k in keys] == [
        (0, batch[0].record_id), (1, batch[1].record_id), (2, batch[2].record_id),
        None, None, (3, batch[5].record_id)]
    written = [k for k in keys if k is not None]
    assert sorted(written) == written and all(k.stored_at >= key.stored_at for k in written)
    assert {r: row.key for r, row in store.executions.stored(
        [k.record_id for k in written]).items()} == {k.record_id: k for k in written}
    # the clocks are the seqs in log order: the stored one came first
    assert [seqs(store).get(r.record_id) for r in batch] == [2, 1, 3, 2, 1, 2]
    # re-importing writes nothing
    assert store.executions.record_many(batch) == [None] * 6
    assert store.executions.count() == 5
    assert store.executions.record_many([]) == []


def test_bulk_import_matches_one_by_one_records(tmp_path: object) -> None:
    records = [rec("abc"[i % 3], ("code", "math")[i % 2], i=i,
                   cost=0.25 if i % 4 == 0 else None) for i in range(330)]
    with AgentRouter(agents=["a", "b", "c"], store="mem://") as one:
        for r in records:
            one.record(r)
        expected = {(p.agent_id, p.task_type): p for p in one.profiles()}
        windows = entries(one.book)
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
        assert entries(bulk.book) == windows
        bulk.refresh()  # the windows and clocks folded from the log equal what record() builds
        assert entries(bulk.book) == windows
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
        # the log keeps every execution; the book rebuilt from it holds the same window
        assert r.store.executions.count() == 60
        assert list(r.book.get("a", "code").window) == in_memory  # type: ignore[union-attr]
        assert r.profile("a", "code").executions_total == 60


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


def test_seqs_are_places_in_log_order_and_a_retry_skips_nothing(kv_url: str) -> None:
    with Store(kv_url) as store:
        first = rec("a", "code", i=1)
        assert store.executions.record(first) is not None
        assert store.executions.record(first) is None  # a retry writes nothing
        second = rec("b", "code", i=2)
        assert store.executions.record(second) is not None
        batch = [rec("a", "math", i=3), first, rec("b", "code", i=4)]
        assert [k is not None for k in store.executions.record_many(batch)] == [
            True, False, True]
    with Store(kv_url) as store:  # the seqs come back from the log
        assert seqs(store) == {first.record_id: 1, second.record_id: 2,
                               batch[0].record_id: 1, batch[2].record_id: 3}
        late = rec("c", "code", i=5)
        store.executions.record(late)
        assert seqs(store)[late.record_id] == 4
    with AgentRouter(agents=["a", "b", "c"], store=kv_url) as r:
        assert (r.book.clock("code"), r.book.clock("math")) == (4, 1)
        window = r.book.get("c", "code")
        assert window is not None and [e.seq for e in window.window] == [4]


def test_a_late_row_takes_its_place_and_later_seqs_move_up() -> None:
    """A row another process stored before rows this router already placed (it became
    visible late) gets the seq of its place in the log; the seqs after it move up."""
    book = ProfileBook()
    a1, b1, a2, late = rec("a", i=1), rec("b", i=2), rec("a", i=3), rec("b", i=4)
    placed, in_order = book.place([LogRow(a1, LogKey(10.0, 0, a1.record_id)),
                                   LogRow(b1, LogKey(20.0, 0, b1.record_id)),
                                   LogRow(a2, LogKey(30.0, 0, a2.record_id))])
    assert in_order and [seq for _, seq in placed] == [1, 2, 3]
    placed, in_order = book.place([LogRow(late, LogKey(15.0, 0, late.record_id))])
    assert not in_order and [seq for _, seq in placed] == [2]
    assert book.clock("code") == 4
    windows = {s.agent_id: [(e.timestamp, e.seq) for e in s.window]
               for s in book.for_task_type("code")}
    stamp = {r.record_id: r.timestamp.timestamp() for r in (a1, b1, a2, late)}
    assert windows == {"a": [(stamp[a1.record_id], 1), (stamp[a2.record_id], 4)],
                       "b": [(stamp[late.record_id], 2), (stamp[b1.record_id], 3)]}
    # the same rows placed in log order give the same book
    ordered = ProfileBook()
    ordered.place(sorted([LogRow(r, k) for r, k in (
        (a1, LogKey(10.0, 0, a1.record_id)), (b1, LogKey(20.0, 0, b1.record_id)),
        (a2, LogKey(30.0, 0, a2.record_id)), (late, LogKey(15.0, 0, late.record_id)))],
        key=lambda row: row.key))
    assert {s.agent_id: [(e.timestamp, e.seq) for e in s.window]
            for s in ordered.for_task_type("code")} == windows


def test_rows_of_a_store_written_before_the_log_load_first_and_retire_whole(
        kv_url: str) -> None:
    """Stores written before the log design have execution rows with a seq and no
    stored_at: they come first, in seq order, new records count on after them, and
    retiring the pair archives them too."""
    from trustroute.profiles.store.trust import TrustRepository

    old = [rec("a", "code", i=i) for i in range(3)]
    with Store(kv_url) as store:
        for seq, r in reversed(list(enumerate(old, start=1))):  # stored in any order
            store.run("CREATE type::thing('execution', $id) CONTENT {agent_id: 'a', "
                      "task_type: 'code', success: $ok, quality: $q, latency_ms: 0.0, "
                      "timestamp: $at, metadata: {}, seq: $seq};",
                      {"id": r.record_id, "ok": r.success, "q": r.effective_quality,
                       "at": r.timestamp, "seq": seq})
    with AgentRouter(agents=["a", "b"], store=kv_url) as r:
        assert r.book.clock("code") == 3
        new = rec("a", "code", i=10)
        r.record(new)
        r.record(rec("b", "code", i=11))
        state = r.book.get("a", "code")
        assert state is not None
        assert [(e.timestamp, e.seq) for e in state.window] == [
            (x.timestamp.timestamp(), seq) for seq, x in enumerate([*old, new], start=1)]
        assert r.profile("a", "code").executions_total == 4
    with Store(kv_url) as store:
        assert seqs(store)[new.record_id] == 4
        repo = store.repository(TrustRepository)
        history = {"agent_id": "a", "task_type": "code", "frequency": 0.0,
                   "effectiveness": 0.0, "human": 0.5, "composite": 0.1,
                   "tier": "deprecated", "reason": "deleted", "at": T0}
        assert repo.retire("a", "code", history, T0) == 4
        assert [row.record.agent_id for row in store.executions.scan()] == ["b"]
        assert len(repo.archived_executions("a", "code")) == 4

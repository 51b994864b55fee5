"""EvidenceLedger: discounting by the task type's clock, pooling sums, rebuild, forgetting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.strategies.evidence import EvidenceLedger

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def feed(ledger: EvidenceLedger, book: ProfileBook, agent: str, task_type: str,
         quality: float, when: datetime = T0) -> None:
    rec = ExecutionRecord(agent_id=agent, task_type=task_type, success=quality >= 0.5,
                          quality=quality, timestamp=when)
    ledger.add(agent, task_type, book.apply(rec).window[-1])


def test_unchosen_agents_evidence_ages_with_the_task_types_clock() -> None:
    ledger, book = EvidenceLedger(100.0, None, 2.0), ProfileBook()
    feed(ledger, book, "a", "code", 1.0)
    for _ in range(100):  # 100 executions of "code" by someone else
        feed(ledger, book, "b", "code", 0.0)
    view = ledger.view("code", ["a", "b"], T0.timestamp())
    assert view.pair[2, 0] == pytest.approx(0.5, rel=1e-9)  # one half-life old
    assert view.pair[0, 0] == pytest.approx(0.5, rel=1e-9)
    # b: sum over ages 0..99 of 2^(-age/100)
    expected = sum(2 ** (-k / 100) for k in range(100))
    assert view.pair[2, 1] == pytest.approx(expected, rel=1e-9)


def test_other_task_types_do_not_age_evidence() -> None:
    ledger, book = EvidenceLedger(10.0, None, 2.0), ProfileBook()
    feed(ledger, book, "a", "code", 0.8)
    for _ in range(50):
        feed(ledger, book, "b", "chat", 0.5)
    assert ledger.view("code", ["a"], T0.timestamp()).pair[2, 0] == pytest.approx(1.0)


def test_pooling_sums_leave_the_pair_itself_out() -> None:
    ledger, book = EvidenceLedger(None, None, 2.0), ProfileBook()
    for q in (1.0, 1.0, 0.0):
        feed(ledger, book, "a", "code", q)
    for q in (1.0, 0.5):
        feed(ledger, book, "a", "chat", q)
    view = ledger.view("code", ["a"], T0.timestamp())
    assert view.pair[:, 0].tolist() == pytest.approx([2.0, 2.0, 3.0])
    assert view.elsewhere[:, 0].tolist() == pytest.approx([1.5, 2.0, 2.0])
    # "expected": chat's baseline times the runs on chat
    chat = ledger.view("chat", ["a"], T0.timestamp()).baseline
    assert view.expected[:, 0].tolist() == pytest.approx((chat * 2.0).tolist())


def test_type_baseline_is_shrunk_toward_the_global_mean() -> None:
    ledger, book = EvidenceLedger(None, None, 2.0), ProfileBook()
    feed(ledger, book, "a", "chat", 0.0)
    feed(ledger, book, "a", "chat", 0.0)
    feed(ledger, book, "a", "code", 1.0)
    # a type's baseline is refreshed when the type gets a record, with the global
    # mean of that moment (here: 1 of 3 runs, under a uniform prior)
    glob = (1.0 + 1.0) / (3.0 + 2.0)
    code = ledger.view("code", ["a"], T0.timestamp()).baseline[0]
    assert code == pytest.approx((1.0 + 2.0 * glob) / 3.0)
    unseen = ledger.view("new-type", ["a"], T0.timestamp())
    assert unseen.baseline[0] == pytest.approx(glob)
    assert unseen.pair.sum() == 0.0


def test_typical_effect_describes_agents_not_choices() -> None:
    ledger, book = EvidenceLedger(None, None, 2.0), ProfileBook()
    for _ in range(40):  # the good agent is chosen a lot
        feed(ledger, book, "good", "code", 1.0)
    for name in ("bad1", "bad2", "bad3"):  # three bad agents tried a few times
        for _ in range(3):
            feed(ledger, book, name, "code", 0.0)
    typical = ledger.typical_effect(2.0)
    assert typical[0] < -0.2  # a typical agent is worse than the choice-weighted baseline


def test_rebuild_from_the_book_matches_incremental_state() -> None:
    rng = np.random.default_rng(0)
    ledger, book = EvidenceLedger(30.0, 86_400.0, 2.0), ProfileBook(window_size=100)
    for i in range(150):
        feed(ledger, book, f"a{rng.integers(3)}", f"t{rng.integers(2)}", float(rng.random()),
             T0 + timedelta(minutes=10 * i))
    fresh = EvidenceLedger(30.0, 86_400.0, 2.0)
    fresh.rebuild(book)
    now = (T0 + timedelta(days=2)).timestamp()
    for task_type in ("t0", "t1"):
        a = ledger.view(task_type, ["a0", "a1", "a2"], now)
        b = fresh.view(task_type, ["a0", "a1", "a2"], now)
        assert np.allclose(a.pair, b.pair, rtol=1e-6)
        assert np.allclose(a.elsewhere, b.elsewhere, rtol=1e-6)
        # baselines are refreshed per record incrementally, all at once on rebuild
        assert np.allclose(a.expected, b.expected, rtol=1e-2)


def test_rebuild_estimates_records_older_than_the_window() -> None:
    ledger, book = EvidenceLedger(20.0, None, 2.0), ProfileBook(window_size=10)
    for i in range(60):
        feed(ledger, book, "a", "code", 1.0 if i % 2 else 0.0)
    fresh = EvidenceLedger(20.0, None, 2.0)
    fresh.rebuild(book)
    exact = ledger.view("code", ["a"], 0.0).pair[:, 0]
    approx = fresh.view("code", ["a"], 0.0).pair[:, 0]
    assert approx[2] == pytest.approx(exact[2], rel=0.02)
    assert approx[0] == pytest.approx(exact[0], rel=0.05)


def test_rebuild_never_weighs_a_record_above_one() -> None:
    # a book whose clock lags its records (e.g. assembled by hand) must not inflate them
    ledger, book = EvidenceLedger(10.0, None, 2.0), ProfileBook()
    for _ in range(5):
        feed(ledger, book, "a", "code", 1.0)
    # the same five records at seqs 1..5, put into the book's state directly: the
    # task type's clock stays at the first one
    lagging = ProfileBook()
    rec = ExecutionRecord(agent_id="a", task_type="code", success=True, quality=1.0,
                          timestamp=T0)
    state = lagging.apply(rec, seq=1)
    for seq in range(2, 6):
        state.apply(rec, seq)
    assert lagging.clock("code") == 1
    assert [e.seq for e in state.window] == [1, 2, 3, 4, 5]
    fresh = EvidenceLedger(10.0, None, 2.0)
    fresh.rebuild(lagging)
    weight = fresh.view("code", ["a"], 0.0).pair[2, 0]
    assert weight == pytest.approx(ledger.view("code", ["a"], 0.0).pair[2, 0])
    assert weight <= 5.0


def test_replace_pair_forgets_and_updates_the_pooled_sums() -> None:
    ledger, book = EvidenceLedger(None, None, 2.0), ProfileBook()
    for _ in range(5):
        feed(ledger, book, "a", "code", 1.0)
    feed(ledger, book, "a", "chat", 1.0)
    state = book.get("a", "code")
    assert state is not None
    ledger.replace_pair("a", "code", list(state.window)[-2:])
    assert ledger.view("code", ["a"], 0.0).pair[2, 0] == pytest.approx(2.0)
    assert ledger.view("chat", ["a"], 0.0).elsewhere[2, 0] == pytest.approx(2.0)


def test_wall_time_discount_and_long_streams_stay_finite() -> None:
    ledger, book = EvidenceLedger(1.0, 3600.0, 2.0), ProfileBook()
    for i in range(2000):  # 2000 half-lives of the clock: frames must re-base
        feed(ledger, book, "a", "code", 1.0, T0 + timedelta(seconds=i))
    view = ledger.view("code", ["a"], (T0 + timedelta(seconds=1999 + 3600)).timestamp())
    assert np.isfinite(view.pair).all()
    # geometric sum of 2^-k is 2; one hour later everything is worth half
    assert view.pair[2, 0] == pytest.approx(1.0, rel=0.01)


def test_new_agents_grow_the_arrays() -> None:
    ledger, book = EvidenceLedger(None, None, 2.0), ProfileBook()
    for i in range(40):
        feed(ledger, book, f"agent-{i}", "code", i / 40)
    view = ledger.view("code", [f"agent-{i}" for i in range(40)], 0.0)
    assert view.pair[0].tolist() == pytest.approx([i / 40 for i in range(40)])


def test_a_lesson_reaches_the_other_task_types_as_far_as_their_priors_weigh() -> None:
    # knowledge_gradient's reach: one outcome teaches about the agent as a whole; on
    # each other task type it counts by the share of the agent's posterior there that
    # rests on the pooled prior, strength / (strength + the agent's evidence there)
    ledger, book = EvidenceLedger(None, None, 2.0), ProfileBook()
    for task_type in ("code", "chat", "math"):
        feed(ledger, book, "b", task_type, 1.0)
    for _ in range(16):
        feed(ledger, book, "a", "chat", 1.0)
    idx = ledger.indices(["a", "b", "new"])
    shares = ledger.prior_shares("code", idx, 16.0)
    # a: chat has 16 runs of its own (half prior), math none; b: one run on each;
    # an agent never seen: the whole prior on both other types
    assert shares.tolist() == pytest.approx([0.5 + 1.0, 2 * 16 / 17, 2.0])

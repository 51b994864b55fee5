"""observe_many (a committed batch at once) learns what observe after each record does.

Each test folds the same records into two strategies: one by one (``book.apply`` then
``observe``, the book as of each record) and in batches (the whole batch applied to the
book first, then one ``observe_many``, as the router does), and compares the learned
state and the decisions built on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileSettings, empty_profile
from trustroute.profiles.records import ExecutionRecord
from trustroute.router import AgentRouter
from trustroute.router.agents import AgentSpec
from trustroute.router.strategies import Arm, ArmScore, StrategyContext, make_strategy
from trustroute.router.strategies.base import StatelessStrategy
from trustroute.router.strategies.change_monitor import ChangeMonitor
from trustroute.router.strategies.pooled_posterior import PooledPosterior

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Committed = list[tuple[ExecutionRecord, int]]


def stream(count: int, agents: int, task_types: int, seed: int, *, seconds: float = 60.0,
           drop: tuple[str, int] | None = None) -> list[ExecutionRecord]:
    """Interleaved records with agent-specific quality; ``drop=(agent, i)``: that agent's
    quality collapses from record i on (a change the monitor must catch)."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.3, 0.9, agents)
    out = []
    for i in range(count):
        a = int(rng.integers(agents))
        agent = f"a{a}"
        mean = means[a]
        if drop is not None and agent == drop[0]:
            mean = 0.9 if i < drop[1] else 0.05
        quality = float(np.clip(rng.normal(mean, 0.15), 0.0, 1.0))
        out.append(ExecutionRecord(
            agent_id=agent, task_type=f"t{int(rng.integers(task_types))}",
            success=quality >= 0.5, quality=quality, latency_ms=float(rng.uniform(10, 500)),
            cost=None if i % 3 == 0 else 0.01, timestamp=T0 + timedelta(seconds=i * seconds)))
    return out


def with_seqs(records: Sequence[ExecutionRecord]) -> Committed:
    """Each record with the seq the store would assign (per task type 1, 2, 3, ...)."""
    clocks: dict[str, int] = {}
    out = []
    for rec in records:
        clocks[rec.task_type] = clocks.get(rec.task_type, 0) + 1
        out.append((rec, clocks[rec.task_type]))
    return out


def one_by_one(committed: Committed, window: int = 100, fired: list[int] | None = None,
               **params: Any) -> tuple[PooledPosterior, ProfileBook]:
    """Fold record by record; ``fired`` collects the positions where a change fired."""
    strategy, book = make_strategy("thompson", **params), ProfileBook(window)
    assert isinstance(strategy, PooledPosterior)
    strategy.reset(book)
    for i, (rec, seq) in enumerate(committed):
        book.apply(rec, seq)
        before = len(strategy.monitor.detected) if strategy.monitor else 0
        strategy.observe(rec, seq, book)
        if fired is not None and strategy.monitor and len(strategy.monitor.detected) > before:
            fired.append(i)
    return strategy, book


def batched(committed: Committed, sizes: Sequence[int], window: int = 100, **params: Any
            ) -> tuple[PooledPosterior, ProfileBook]:
    strategy, book = make_strategy("thompson", **params), ProfileBook(window)
    assert isinstance(strategy, PooledPosterior)
    strategy.reset(book)
    start = 0
    for size in [*sizes, len(committed)]:
        chunk = committed[start:start + size] if size else []
        for rec, seq in chunk:
            book.apply(rec, seq)
        strategy.observe_many(chunk, book)
        start += len(chunk)
        if start >= len(committed):
            break
    return strategy, book


def assert_same_state(a: PooledPosterior, b: PooledPosterior) -> None:
    la, lb = a.ledger, b.ledger
    assert la.agent_ids() == lb.agent_ids()
    assert list(la._types) == list(lb._types)
    for name, ta in la._types.items():
        tb = lb._types[name]
        assert (ta.clock, ta.ref) == (tb.clock, tb.ref), name
        assert ta.decay == pytest.approx(tb.decay, rel=1e-12)
        np.testing.assert_allclose(ta.sums, tb.sums, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ta.baseline, tb.baseline, rtol=1e-9, atol=1e-12)
    for attr in ("_agents", "_expected", "_overall"):
        np.testing.assert_allclose(getattr(la, attr), getattr(lb, attr), rtol=1e-9, atol=1e-9)
    assert la._time_ref == lb._time_ref and la._latest == lb._latest
    assert a._usage.keys() == b._usage.keys()
    for agent, usage in a._usage.items():
        assert usage == pytest.approx(b._usage[agent], rel=1e-12)
    if a.monitor is not None and b.monitor is not None:
        assert [(c.agent_id, c.keep_from, c.change) for c in a.monitor.detected] == \
            [(c.agent_id, c.keep_from, c.change) for c in b.monitor.detected]


def assert_same_decisions(a: PooledPosterior, b: PooledPosterior, book: ProfileBook,
                          agents: int, task_types: int) -> None:
    """Same posteriors, so the same lower-bound ranking and (seeded) Thompson draws."""
    specs = [AgentSpec(id=f"a{i}") for i in range(agents)]
    now = T0 + timedelta(days=1)
    for t in range(task_types):
        task_type = f"t{t}"
        arms = [Arm(s, book.get(s.id, task_type), empty_profile(s.id, task_type)) for s in specs]
        verdicts = []
        for strategy in (a, b):
            ctx = StrategyContext(task_type, now, book, ProfileSettings(),
                                  np.random.default_rng(7))
            post = strategy.posterior(arms, ctx)
            verdicts.append((post.mean, post.success, post.lower_bound,
                             [v.score for v in strategy.score(arms, ctx)]))
        for x, y in zip(verdicts[0], verdicts[1], strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-7, atol=1e-9)
        assert np.argsort(-verdicts[0][2]).tolist() == np.argsort(-verdicts[1][2]).tolist()


def test_default_thompson_batches_learn_the_same_as_one_by_one() -> None:
    committed = with_seqs(stream(3000, agents=6, task_types=4, seed=1))
    seq_s, book = one_by_one(committed)
    for sizes in ([3000], [700, 1, 0, 999, 2]):
        batch_s, _ = batched(committed, sizes)
        assert_same_state(seq_s, batch_s)
        assert_same_decisions(seq_s, batch_s, book, 6, 4)


def test_a_change_mid_batch_forgets_as_of_its_own_record() -> None:
    # a4 collapses at record 900 of one 2400-record batch; a small book window (12) means
    # later records of the batch push the entries kept at the change out of the window
    records = stream(2400, agents=5, task_types=3, seed=3, drop=("a4", 900))
    committed = with_seqs(records)
    fired: list[int] = []
    seq_s, book = one_by_one(committed, window=12, fired=fired)
    batch_s, _ = batched(committed, [2400], window=12)
    assert seq_s.monitor is not None
    assert any(c.agent_id == "a4" for c in seq_s.monitor.detected), "collapse not detected"
    assert any(900 < i < 2300 for i in fired)  # well inside the batch
    assert_same_state(seq_s, batch_s)
    assert_same_decisions(seq_s, batch_s, book, 5, 3)
    # the evidence of a4 is what came after the collapse: low quality everywhere
    view = batch_s.ledger.view("t0", ["a4"], (T0 + timedelta(days=1)).timestamp())
    assert view.pair[0, 0] / view.pair[2, 0] < 0.3


def test_several_changes_and_agents_across_batches() -> None:
    records = stream(1500, agents=3, task_types=2, seed=4, drop=("a1", 300))
    records += [r.model_copy(update={"agent_id": "a2", "quality": 1.0 - r.effective_quality,
                                     "success": r.effective_quality < 0.5,
                                     "timestamp": r.timestamp + timedelta(days=2)})
                for r in records[:900] if r.agent_id == "a0"]
    committed = with_seqs(records)
    seq_s, book = one_by_one(committed)
    batch_s, _ = batched(committed, [400, 400, 37, 900])
    assert seq_s.monitor is not None and len(seq_s.monitor.detected) >= 2
    assert_same_state(seq_s, batch_s)
    assert_same_decisions(seq_s, batch_s, book, 3, 2)


def test_frames_re_base_mid_batch_on_clock_and_wall_time() -> None:
    # half-lives of 2 executions and ~14 minutes over records 10 minutes apart: both
    # frames re-base (every 200 half-lives) several times inside one batch
    params = {"half_life_executions": 2.0, "half_life_days": 0.01}
    committed = with_seqs(stream(2500, agents=4, task_types=2, seed=5, seconds=600.0))
    seq_s, book = one_by_one(committed, **params)
    batch_s, _ = batched(committed, [2500], **params)
    assert seq_s.ledger._time_ref != committed[0][0].timestamp.timestamp()  # re-based
    assert max(te.ref for te in seq_s.ledger._types.values()) > 0  # clock frame re-based
    assert_same_state(seq_s, batch_s)
    assert_same_decisions(seq_s, batch_s, book, 4, 2)


def test_no_discounting_and_no_change_detection() -> None:
    params = {"half_life_executions": None, "change_detection": False, "pooling": False}
    committed = with_seqs(stream(800, agents=3, task_types=3, seed=6))
    seq_s, book = one_by_one(committed, **params)
    batch_s, _ = batched(committed, [300, 500], **params)
    assert_same_state(seq_s, batch_s)
    assert_same_decisions(seq_s, batch_s, book, 3, 3)


def test_monitor_add_many_runs_the_same_tests() -> None:
    records = stream(1200, agents=3, task_types=3, seed=8, drop=("a0", 500))
    committed = with_seqs(records)
    one, many = ChangeMonitor(window=60), ChangeMonitor(window=60)
    fired_one = []
    for i, (rec, seq) in enumerate(committed):
        change = one.add(rec.agent_id, rec.task_type, seq, rec.effective_quality,
                         rec.timestamp.timestamp(), rec.success)
        if change is not None:
            fired_one.append((i, change))
    fired_many = many.add_many(
        [r.agent_id for r, _ in committed], [r.task_type for r, _ in committed],
        np.array([s for _, s in committed]), np.array([r.effective_quality for r, _ in committed]),
        np.array([r.timestamp.timestamp() for r, _ in committed]),
        np.array([r.success for r, _ in committed]))
    assert fired_one and fired_many == fired_one
    for agent, history in one._history.items():
        other = many._history[agent]
        assert (history.size, history.since_test, history.types) == \
            (other.size, other.since_test, other.types)
        assert history.values[:history.size].tolist() == other.values[:other.size].tolist()


def test_router_bulk_import_matches_recording_one_by_one() -> None:
    records = stream(600, agents=3, task_types=2, seed=9, drop=("a2", 250))
    with AgentRouter(agents=["a0", "a1", "a2"], store="mem://") as bulk, \
            AgentRouter(agents=["a0", "a1", "a2"], store="mem://") as single:
        assert bulk.record_many(records, batch_size=250) == 600
        for rec in records:
            single.record(rec)
        assert isinstance(bulk.strategy, PooledPosterior)
        assert isinstance(single.strategy, PooledPosterior)
        assert single.strategy.monitor is not None and single.strategy.monitor.detected
        assert_same_state(single.strategy, bulk.strategy)


class Legacy:
    """A strategy written before observe_many: it reads the book as of each record."""

    name = "legacy"

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        return [ArmScore(0.0, "constant") for _ in arms]

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        self.seen.append((seq, book.clock(record.task_type)))

    def reset(self, book: ProfileBook) -> None:
        self.seen.clear()


def test_a_strategy_without_observe_many_still_sees_the_book_as_of_each_record() -> None:
    legacy = Legacy()
    with AgentRouter(agents=["a0"], store="mem://", strategy=legacy) as router:  # type: ignore[arg-type]
        assert router.record_many(stream(5, agents=1, task_types=1, seed=0)) == 5
        assert router.select("t0").agent_id == "a0"
    assert legacy.seen == [(i, i) for i in range(1, 6)]


def test_stateless_strategies_accept_batches() -> None:
    strategy = make_strategy("confidence_weighted")
    assert isinstance(strategy, StatelessStrategy)
    committed = with_seqs(stream(3, agents=1, task_types=1, seed=0))
    strategy.observe_many(committed, ProfileBook())  # nothing to learn, nothing raised
    with AgentRouter(agents=["a0"], store="mem://", strategy="confidence_weighted") as router:
        assert router.record_many([r for r, _ in committed]) == 3
        assert router.profile("a0", "t0").executions_total == 3

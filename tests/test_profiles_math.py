"""Profile math at the reference values: recency weights, expertise, confidence."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from trustroute.profiles import (
    ExecutionRecord,
    ProfileBook,
    ProfileSettings,
    ProfileState,
    RecencySettings,
    ramp_confidence,
    recency_weights,
    weighted_expertise,
)
from trustroute.profiles.recency import SECONDS_PER_DAY
from trustroute.profiles.store.executions import LogKey, LogRow

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def record(quality: float, age_days: float = 0.0, *, success: bool = True, agent: str = "a",
           task: str = "code", latency_ms: float = 0.0, cost: float | None = None
           ) -> ExecutionRecord:
    return ExecutionRecord(agent_id=agent, task_type=task, success=success, quality=quality,
                           latency_ms=latency_ms, cost=cost,
                           timestamp=NOW - timedelta(days=age_days))


def test_recency_weights_at_reference_values() -> None:
    settings = RecencySettings()
    ages = np.array([0.0, 1.0, 6.999, 7.0, 14.0, -2.0])
    expected = [3.0, 3 * math.exp(-1 / 7), 3 * math.exp(-6.999 / 7), math.exp(-1.0),
                math.exp(-2.0), 3.0]
    assert recency_weights(ages, settings) == pytest.approx(expected)


def test_recency_settings_are_configurable_and_checked() -> None:
    settings = RecencySettings(time_constant_days=14.0, boost=2.0, boost_window_days=3.0)
    weights = recency_weights(np.array([0.0, 2.0, 3.0, 14.0]), settings)
    assert weights == pytest.approx([2.0, 2 * math.exp(-2 / 14), math.exp(-3 / 14),
                                     math.exp(-1.0)])
    for bad in ({"time_constant_days": 0.0}, {"boost": -1.0}, {"boost_window_days": -1.0},
                {"window_size": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            RecencySettings(**bad)  # type: ignore[arg-type]


def test_expertise_is_the_recency_weighted_mean_quality() -> None:
    now = NOW.timestamp()
    stamps = [now, now - 7 * SECONDS_PER_DAY]
    # fresh 1.0 weighs 3, week-old 0.0 weighs e^-1
    expected = 3.0 / (3.0 + math.exp(-1.0))
    assert weighted_expertise([1.0, 0.0], stamps, now, RecencySettings()) == \
        pytest.approx(expected)
    assert weighted_expertise([], [], now, RecencySettings()) == 0.0
    # equal ages: the plain mean
    assert weighted_expertise([0.2, 0.6], [now, now], now, RecencySettings()) == \
        pytest.approx(0.4)


def test_expertise_only_counts_the_window() -> None:
    state = ProfileState("a", "code", window_size=100)
    for seq in range(1, 51):
        state.apply(record(0.0, age_days=1.0), seq)
    for seq in range(51, 151):
        state.apply(record(1.0, age_days=1.0), seq)
    assert len(state.window) == 100
    assert state.window[0].seq == 51
    assert state.expertise(NOW, RecencySettings()) == pytest.approx(1.0)
    assert state.executions_total == 150


@pytest.mark.parametrize(("runs", "confidence"),
                         [(0, 0.0), (1, 0.05), (5, 0.25), (10, 0.5), (19, 0.95), (20, 1.0),
                          (21, 1.0), (500, 1.0)])
def test_confidence_ramp(runs: int, confidence: float) -> None:
    assert ramp_confidence(runs) == pytest.approx(confidence)


def test_confidence_ramp_is_configurable() -> None:
    assert ramp_confidence(5, ramp=10) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="confidence_ramp"):
        ProfileSettings(confidence_ramp=0)


def test_snapshot_carries_every_derived_number() -> None:
    state = ProfileState("a", "code")
    state.apply(record(0.8, success=True, latency_ms=100.0, cost=0.5), 1)
    state.apply(record(0.2, success=False, latency_ms=300.0), 2)
    snap = state.snapshot(NOW, ProfileSettings())
    assert snap.executions_total == 2
    assert snap.executions_successful == 1
    assert snap.success_rate == pytest.approx(0.5)
    assert snap.avg_quality == pytest.approx(0.5)
    assert snap.avg_latency_ms == pytest.approx(200.0)
    assert snap.avg_cost == pytest.approx(0.5)
    assert snap.last_updated == NOW
    assert snap.expertise == pytest.approx(0.5)
    assert snap.confidence == pytest.approx(0.1)
    assert snap.adjusted_score == pytest.approx(0.05)


def test_lucky_newcomer_scores_below_an_established_agent() -> None:
    settings = ProfileSettings()
    newcomer = ProfileState("new", "code")
    newcomer.apply(record(0.95, agent="new"), 1)
    veteran = ProfileState("old", "code")
    for seq in range(2, 12):
        veteran.apply(record(0.80, agent="old"), seq)
    lucky = newcomer.snapshot(NOW, settings)
    steady = veteran.snapshot(NOW, settings)
    assert lucky.adjusted_score == pytest.approx(0.95 * 0.05)
    assert steady.adjusted_score == pytest.approx(0.80 * 0.50)
    assert lucky.adjusted_score < steady.adjusted_score


def test_book_keeps_task_clocks() -> None:
    book = ProfileBook(window_size=100)
    book.apply(record(1.0))
    book.apply(record(1.0, agent="b"))
    assert book.clock("code") == 2
    assert book.clock("other") == 0
    assert {s.agent_id for s in book.for_task_type("code")} == {"a", "b"}
    b = book.get("b", "code")
    assert b is not None and [e.seq for e in b.window] == [2]
    placed, in_order = book.place([LogRow(record(1.0, task="other"), LogKey(1.0, 0, "x"))])
    assert in_order and [seq for _, seq in placed] == [1]
    assert book.clock("other") == 1 and book.clock("code") == 2
    book.clear()
    assert book.get("a", "code") is None
    assert book.clock("code") == 0
    assert book.clock("other") == 0


def test_expertise_never_leaves_the_unit_interval() -> None:
    rng = np.random.default_rng(3)
    now = NOW.timestamp()
    for n in (3, 20, 37, 100):
        stamps = list(now - rng.uniform(0, 30, n) * SECONDS_PER_DAY)
        assert weighted_expertise([1.0] * n, stamps, now, RecencySettings()) <= 1.0
        assert weighted_expertise([0.0] * n, stamps, now, RecencySettings()) >= 0.0


def test_a_reused_snapshot_equals_a_fresh_computation_at_every_moment() -> None:
    """Snapshots are reused until a record arrives or an entry's age crosses the boost
    window (or 0, for a future timestamp): at any moment the answer is what a state that
    never computed one before gives."""
    rng = np.random.default_rng(7)
    settings = ProfileSettings()
    ages = [*rng.uniform(-2.0, 20.0, size=30), 6.999, 7.0, 7.001, -0.001]
    records = [record(float(rng.uniform()), float(age)) for age in ages]
    reused = ProfileState("a", "code")
    for seq, rec in enumerate(records, 1):
        reused.apply(rec, seq)
    for hours in sorted(rng.uniform(0.0, 24 * 30, size=200)):
        moment = NOW + timedelta(hours=float(hours))
        fresh = ProfileState("a", "code")
        for seq, rec in enumerate(records, 1):
            fresh.apply(rec, seq)
        assert reused.snapshot(moment, settings).expertise == \
            pytest.approx(fresh.snapshot(moment, settings).expertise, rel=1e-12, abs=1e-15)
    late = record(0.0, -1.0)
    reused.apply(late, len(records) + 1)
    later = NOW + timedelta(days=31)
    assert reused.snapshot(later, settings).executions_total == len(records) + 1


def test_running_expertise_equals_the_reference_pass_through_a_stream() -> None:
    """Expertise kept as running sums (records entering and leaving a small window,
    verdicts amending qualities, late rows, timestamps ahead of the clock, ages crossing
    the boost window, far more updates than the sums keep between redraws) is at every
    moment what the reference pass over the window gives."""
    rng = np.random.default_rng(11)
    settings = ProfileSettings(recency=RecencySettings(window_size=12))
    state = ProfileState("a", "code", window_size=12)
    moment = NOW
    for seq in range(1, 700):
        moment += timedelta(hours=float(rng.exponential(4.0)))
        age = float(rng.choice([0.0, 0.0, 3.0, 6.99, 8.0, -0.5]))  # -0.5: ahead of the clock
        rec = ExecutionRecord(agent_id="a", task_type="code", success=True,
                              quality=float(rng.uniform()),
                              timestamp=moment - timedelta(days=age))
        late = seq % 50 == 0  # a row whose log key sorts before the newest ones
        key = LogKey(moment.timestamp() - (3600.0 if late else 0.0), seq, "x")
        state.apply(rec, seq, key, None if seq % 7 else (None, True))  # every 7th pending
        if seq % 9 == 0 and state.window:  # a verdict on a recent entry
            entry = state.window[-1]
            old = (entry.quality, entry.quality is None)
            state.amend(entry.seq, entry.timestamp, entry.key, old,
                        (float(rng.uniform()), False))
        for later in (0.0, float(rng.uniform(0.0, 10.0))):
            at = moment + timedelta(days=later)
            assert state.snapshot(at, settings).expertise == pytest.approx(
                state.expertise(at, settings.recency), rel=1e-12, abs=1e-15)

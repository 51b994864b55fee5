"""Named signals, reviews, rescues and the pure decay math."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from trustroute.profiles.trust_counts import TrustCounts, TrustDelta
from trustroute.router.trust.decay import (
    DecaySettings,
    decay_once,
    due_for_deletion,
    is_unseen,
    iso_week,
)
from trustroute.router.trust.rescues import Rescue, RescueTracker
from trustroute.router.trust.scores import (
    SIGNALS,
    execution_delta,
    human_score,
    reference_human_score,
    signal_delta,
    trust_scores,
    verdict_delta,
)

T0 = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)  # a Monday


def _apply(counts: TrustCounts, *deltas: TrustDelta) -> TrustCounts:
    for delta in deltas:
        delta.apply_to(counts)
    return counts


@pytest.mark.parametrize(("signal", "field", "amount"), [
    ("pattern_observed_again", "observations", 1),
    ("applied_successfully", "positive", 1),
    ("applied_successfully", "observations", 1),
    ("causal_link_confirmed", "positive", 1),
    ("user_accepted", "approvals", 1),
    ("reflect_approved", "approvals", 1),
    ("pattern_contradicted", "contradictions", 1),
    ("applied_failed", "negative", 1),
    ("applied_failed", "observations", 1),
    ("user_corrected", "rejections", 1),
    ("reflect_rejected", "rejections", 1),
])
def test_each_named_signal_moves_its_count(signal: str, field: str, amount: int) -> None:
    counts = _apply(TrustCounts(), signal_delta("a", "code", signal, T0))
    assert getattr(counts, field) == amount
    assert counts.last_seen == T0


def test_every_named_signal_is_documented() -> None:
    assert set(SIGNALS) == {
        "pattern_observed_again", "applied_successfully", "user_accepted", "reflect_approved",
        "causal_link_confirmed", "pattern_contradicted", "applied_failed", "user_corrected",
        "reflect_rejected"}
    assert all(effect.meaning for effect in SIGNALS.values())


def test_signals_count_as_approvals_and_rejections() -> None:
    # two approving signals and one rejecting: the counts the reference's 0.5429375 is
    # computed from, scored the cautious way (docs/trust.md)
    counts = _apply(TrustCounts(), *(signal_delta("a", "code", name, T0) for name in
                                     ("user_accepted", "user_corrected", "reflect_approved")))
    assert (counts.approvals, counts.rejections) == (2, 1)
    assert reference_human_score(2, 1) == pytest.approx(0.5429375)
    assert trust_scores(counts).human == pytest.approx(human_score(2, 1))


def test_unknown_signal_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match=r"'user_loved_it'.*applied_failed"):
        signal_delta("a", "code", "user_loved_it", T0)


def test_review_approval_pins_and_a_rejection_withdraws_it() -> None:
    counts = _apply(TrustCounts(), verdict_delta("a", "code", True, T0, review=True))
    assert trust_scores(counts).human == 0.95
    _apply(counts, signal_delta("a", "code", "user_corrected", T0))
    assert counts.reviewed is False
    assert trust_scores(counts).human == pytest.approx(human_score(1, 1))


def test_feedback_approval_counts_but_does_not_pin() -> None:
    counts = _apply(TrustCounts(), verdict_delta("a", "code", True, T0, review=False))
    assert (counts.approvals, counts.reviewed) == (1, False)
    assert trust_scores(counts).human == pytest.approx(human_score(1, 0))


def test_fresh_evidence_clears_decay_offsets_and_moves_last_seen() -> None:
    counts = TrustCounts(frequency_decay=0.04, effectiveness_decay=0.02, human_decay=0.01,
                         last_seen=T0)
    _apply(counts, execution_delta("a", "code", "positive", T0 - timedelta(days=1)))
    assert (counts.frequency_decay, counts.effectiveness_decay, counts.human_decay) == \
        (0.0, 0.0, 0.0)
    assert (counts.observations, counts.positive) == (1, 1)
    assert counts.last_seen == T0  # an older observation does not move it back


@pytest.mark.parametrize(("decayed_at", "kept"), [
    (T0 + timedelta(hours=2), True),  # no evidence after the decay: its offsets count
    (T0 + timedelta(minutes=30), False),  # newer evidence exists: they do not
])
def test_deltas_fold_to_the_same_counts_in_any_order(decayed_at: datetime, kept: bool
                                                     ) -> None:
    """Routers receive log rows in different orders: the counts must not depend on it."""
    deltas = [execution_delta("a", "code", "negative", T0),
              signal_delta("a", "code", "user_corrected", T0 + timedelta(hours=1)),
              TrustDelta("a", "code", contradictions=1),
              verdict_delta("a", "code", True, T0 - timedelta(days=1), review=False),
              execution_delta("a", "code", "positive", T0 - timedelta(days=2)),
              # the latest verdict decides ``reviewed``, whatever order it is folded in
              verdict_delta("a", "code", True, T0 + timedelta(hours=2), review=True)]
    offsets = (0.04, 0.02, 0.01)
    results = []
    for order in itertools.permutations(deltas):
        for mark in range(len(deltas) + 1):  # the lifecycle's marks folded in anywhere
            counts = TrustCounts(reviewed=True)
            for i, delta in enumerate(order):
                if i == mark:
                    counts.set_decay(offsets, decayed_at, None)
                delta.apply_to(counts)
            if mark == len(deltas):
                counts.set_decay(offsets, decayed_at, None)
            results.append(counts)
    first = results[0]
    assert all(counts == first for counts in results)
    assert (first.observations, first.positive, first.negative, first.approvals,
            first.rejections, first.contradictions) == (2, 1, 1, 2, 1, 1)
    assert first.reviewed is True and first.last_seen == T0 + timedelta(hours=2)
    assert (first.frequency_decay, first.effectiveness_decay, first.human_decay) == (
        offsets if kept else (0.0, 0.0, 0.0))
    assert first.decayed_at == decayed_at


def test_decay_once_adds_one_week_and_caps_at_one() -> None:
    s = DecaySettings()
    counts = TrustCounts(observations=30, positive=30, last_seen=T0)
    once = decay_once(counts, s)
    assert (once.frequency_decay, once.effectiveness_decay, once.human_decay) == \
        pytest.approx((0.02, 0.01, 0.005))
    assert counts.frequency_decay == 0.0  # a copy
    f0, e0, h0, _, _ = trust_scores(counts)
    f1, e1, h1, _, _ = trust_scores(once)
    assert (f0 - f1, e0 - e1, h0 - h1) == pytest.approx((0.02, 0.01, 0.005))
    heavy = TrustCounts(frequency_decay=0.995)
    assert decay_once(heavy, s).frequency_decay == 1.0


def test_unseen_and_deletion_clocks() -> None:
    s = DecaySettings()
    counts = TrustCounts(last_seen=T0)
    assert not is_unseen(counts, T0 + timedelta(days=6, hours=23), s)
    assert is_unseen(counts, T0 + timedelta(days=7), s)
    counts.deprecated_at = T0
    assert not due_for_deletion(counts, T0 + timedelta(days=30), s)
    assert due_for_deletion(counts, T0 + timedelta(days=30, seconds=1), s)


def test_iso_week_key() -> None:
    assert iso_week(T0) == "2025-W10"
    assert iso_week(T0 + timedelta(days=6, hours=11)) == "2025-W10"  # Sunday
    assert iso_week(T0 + timedelta(days=7)) == "2025-W11"
    assert iso_week(datetime(2021, 1, 3, tzinfo=UTC)) == "2020-W53"


def test_decay_settings_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="frequency"):
        DecaySettings(frequency=-0.1)
    with pytest.raises(ValueError, match="unseen_days"):
        DecaySettings(unseen_days=float("inf"))
    with pytest.raises(ValueError, match="colour"):
        DecaySettings(colour=1)  # type: ignore[call-arg]


def pairs(rescues: list[Rescue]) -> list[tuple[str, str]]:
    """The (agent, task type) pairs the rescues charge."""
    return [(r.agent_id, r.task_type) for r in rescues]


def test_rescue_charges_each_failed_agent_once() -> None:
    tracker = RescueTracker()
    assert pairs(tracker.observe("a", "code", False, {"task_id": "T1", "attempt": 0})) == []
    assert pairs(tracker.observe("b", "code", False, {"task_id": "T1", "attempt": 1})) == []
    assert sorted(pairs(tracker.observe("c", "code", True, {"task_id": "T1", "attempt": 2}))) == \
        [("a", "code"), ("b", "code")]
    assert pairs(tracker.observe("d", "code", True, {"task_id": "T1", "attempt": 3})) == []


def test_rescue_needs_another_agent_and_a_later_attempt() -> None:
    tracker = RescueTracker()
    tracker.observe("a", "code", False, {"task_id": "T", "attempt": 1})
    assert tracker.observe("a", "code", True, {"task_id": "T", "attempt": 2}) == []  # itself
    assert tracker.observe("b", "code", True, {"task_id": "T", "attempt": 0}) == []  # earlier
    rescued = tracker.observe("b", "code", True, {"task_id": "T", "attempt": 3})
    assert pairs(rescued) == [("a", "code")]


def test_rescue_without_task_id_is_not_a_contradiction() -> None:
    tracker = RescueTracker()
    tracker.observe("a", "code", False, {})
    assert pairs(tracker.observe("b", "code", True, {})) == []


def test_failure_reported_after_its_rescue_is_still_charged() -> None:
    tracker = RescueTracker()
    tracker.observe("b", "code", True, {"task_id": "T", "attempt": 2})
    late = tracker.observe("a", "code", False, {"task_id": "T", "attempt": 1})
    assert pairs(late) == [("a", "code")]


def test_rescue_memory_is_bounded() -> None:
    tracker = RescueTracker(capacity=2)
    tracker.observe("a", "x", False, {"task_id": "T1"})
    tracker.observe("a", "x", False, {"task_id": "T2"})
    tracker.observe("a", "x", False, {"task_id": "T3"})
    assert len(tracker) == 2
    assert pairs(tracker.observe("b", "x", True, {"task_id": "T1"})) == []  # forgotten


def test_attempts_without_numbers_are_ordered_by_when_they_happened() -> None:
    """Routers receive records in different orders: a failure that reaches the tracker
    after the success that rescued it is still charged when the records say when they
    happened, and a success that happened before the failure rescues nothing."""
    late = RescueTracker()
    late.observe("b", "code", True, {"task_id": "T"}, (20.0, "r2"))
    charged = late.observe("a", "code", False, {"task_id": "T"}, (10.0, "r1"))
    assert pairs(charged) == [("a", "code")]
    early = RescueTracker()
    early.observe("b", "code", True, {"task_id": "T"}, (10.0, "r1"))
    assert pairs(early.observe("a", "code", False, {"task_id": "T"}, (20.0, "r2"))) == []

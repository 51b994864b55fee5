"""The trust layer inside a router: tiers on the way in, calibrated confidence on the way
out, counts and history on every outcome.

``AgentRouter`` calls it at three points, none of which touches the database on the
decision path:

- ``admit`` (in ``select``): the tier policy narrows the candidates (a dict lookup per
  agent, and nothing at all while no pair is deprecated and exploitation is off);
- ``decide`` (end of ``select``): calibrated confidence, decision tier, abstention
  gates, the decision buffered for the log, and the ``on_abstain`` action
  (``trustroute.router.trust.abstain_action``);
- ``observe`` (in ``record``, under the router lock): trust counts, contradictions,
  the decision joined with its outcome and the calibration map refreshed.

Buffered writes go to the store in batches from ``record()`` once ``flush_every`` items
or ``flush_seconds`` have accumulated, and on ``flush()``/``close()``. Feedback and
reviews are written at once: a person's verdict is never left in a buffer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from trustroute.profiles.records import ExecutionRecord, check_identifier, utc_now
from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.trust import TrustDelta, TrustRepository, history_row
from trustroute.router.decision import CandidateScore, RoutingDecision
from trustroute.router.errors import NoAgentAvailable, UnknownDecision
from trustroute.router.trust.abstain_action import AbstainAction
from trustroute.router.trust.abstention import AbstentionPolicy, GateView
from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.calibration import CalibrationSettings
from trustroute.router.trust.decay import DecaySettings
from trustroute.router.trust.decision_log import DecisionLog
from trustroute.router.trust.policy import TierPolicy
from trustroute.router.trust.rescues import RescueTracker
from trustroute.router.trust.scores import (
    DEFAULT_WEIGHTS,
    SIGNALS,
    Tier,
    TrustCounts,
    TrustScores,
    add_one,
    apply_signal,
    check_weights,
    outcome_kind,
)

log = logging.getLogger(__name__)

Pair = tuple[str, str]
T = TypeVar("T", bound=tuple[Any, ...])


@dataclass(frozen=True, slots=True)
class TrustOptions:
    """Everything the trust layer can be configured with (defaults documented in
    docs/trust.md)."""

    weights: tuple[float, float, float] = DEFAULT_WEIGHTS
    policy: TierPolicy = field(default_factory=TierPolicy)
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)
    decay: DecaySettings = field(default_factory=DecaySettings)
    confidence_tiers: tuple[float, float] = (0.5, 0.8)  # medium from, strong from
    unknown_probability: float = 0.5  # raw confidence when the strategy has no estimate
    log_decisions: bool = True
    log_candidates: int | None = 8  # the head of each logged ranking; None logs them all
    flush_every: int = 16
    flush_seconds: float = 1.0
    rescue_memory: int = 10_000

    def __post_init__(self) -> None:
        check_weights(self.weights)
        medium, strong = self.confidence_tiers
        if not 0.0 <= medium <= strong <= 1.0:
            raise ValueError("trust.confidence_tiers must satisfy 0 <= medium <= strong <= 1, "
                             f"got {self.confidence_tiers}")
        if not 0.0 <= self.unknown_probability <= 1.0:
            raise ValueError("trust.unknown_probability must be within [0, 1]")
        if self.log_candidates is not None and self.log_candidates < 1:
            raise ValueError("trust.log_candidates must be >= 1 (or null for every candidate)")
        if self.flush_every < 1 or not self.flush_seconds >= 0:
            raise ValueError("trust.flush_every must be >= 1 and flush_seconds >= 0")


class TrustLayer:
    """Per-router trust state, policy and buffered persistence."""

    def __init__(self, store: Store, strategy: str, options: TrustOptions | None = None,
                 abstention: AbstentionPolicy | None = None, transfer: Any = None, *,
                 exploit_only: bool = False) -> None:
        self.options = options or TrustOptions()
        self.abstention = abstention or AbstentionPolicy()
        self.book = TrustBook(self.options.weights)
        self.rescues = RescueTracker(self.options.rescue_memory)
        self.repo = store.repository(TrustRepository)
        self.decisions = DecisionLog(store.repository(DecisionRepository), strategy,
                                     self.options.calibration,
                                     enabled=self.options.log_decisions,
                                     log_candidates=self.options.log_candidates)
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._deltas: dict[Pair, TrustDelta] = {}
        self._changed: dict[Pair, tuple[TrustScores, Counter[str], datetime]] = {}
        self._feedback: list[dict[str, Any]] = []
        self.exploit_only = exploit_only  # decides which pairs reload() loads up front
        self._last_flush = time.monotonic()
        self.abstain_action = AbstainAction(self.abstention.on_abstain, transfer)

    # -- decisions (hot path) -----------------------------------------------------
    def order(self, task_type: str, ranked: list[T], exploit_only: bool) -> list[T]:
        """The ranked candidates with the ones the tier policy does not admit moved last
        (their reason says why), so the chosen agent is admitted and nobody is hidden.

        ``ranked`` items are the router's candidate tuples; each holds one
        CandidateScore. Raises NoAgentAvailable when no candidate is admitted.
        """
        if not (exploit_only or self.book.deprecated_pairs):
            return ranked  # the common case: two attribute reads
        scores = [_candidate_of(item) for item in ranked]
        keep = self.options.policy.admit([c.agent_id for c in scores], task_type, self.book,
                                         exploit_only)
        if keep is None:
            return ranked
        if not keep:
            raise NoAgentAvailable(task_type, f"all {len(ranked)} eligible agent(s) are in the "
                                              "deprecated trust tier")
        kept = set(keep)
        moved = []
        for i, item in enumerate(ranked):
            if i in kept:
                continue
            tier = self.book.tier(scores[i].agent_id, task_type)
            why = ("not selected: trust tier deprecated" if tier is Tier.DEPRECATED else
                   f"not selected: exploit-only mode uses core/strong agents (tier {tier})")
            moved.append(_with_reason(item, scores[i], f"{why}; {scores[i].reason}"))
        return [ranked[i] for i in keep] + moved

    def decide(self, decision: RoutingDecision,
               probabilities: Sequence[float | None]) -> RoutingDecision:
        """Fill in confidence, tier and abstention; buffer the decision for the log."""
        first = probabilities[0] if probabilities else None
        raw = self.options.unknown_probability if first is None else \
            0.0 if first < 0.0 else 1.0 if first > 1.0 else first
        calibrate = self.decisions.calibration
        confidence = calibrate(raw)
        medium, strong = self.options.confidence_tiers
        decision.confidence = confidence
        decision.tier = "strong" if confidence >= strong else \
            "medium" if confidence >= medium else "weak"
        verdict = self.abstention.evaluate(GateView(
            decision.task_type, decision.candidates, probabilities, calibrate, confidence)) \
            if self.abstention.gates else None
        detail = None
        if verdict is not None:
            decision.abstained = True
            decision.abstain_reason, detail = verdict
        self.decisions.remember(decision, raw, probabilities, detail)
        if verdict is not None:
            self.abstain_action(decision, detail or "")
        return decision

    # -- outcomes -----------------------------------------------------------------
    def observe(self, record: ExecutionRecord) -> None:
        """Fold one committed execution in (called under the router's lock; no I/O)."""
        self.observe_many((record,))

    def observe_many(self, records: Sequence[ExecutionRecord]) -> None:
        """Fold committed executions in, in order (under the router's lock; no I/O):
        what one ``_change`` per execution and rescue does, counted in place, since a
        TrustDelta built and merged per record was most of a bulk import's Python time.
        Scores stay per record: each step's before/after decides history and lifts."""
        with self._lock:
            for record in records:
                agent, at = record.agent_id, record.timestamp
                kind = outcome_kind(record.success, record.effective_quality)
                self._count((agent, record.task_type), kind, f"execution {kind}", at, at)
                for pair in self.rescues.observe(agent, record.task_type, record.success,
                                                 record.metadata):
                    self._count(pair, "contradictions", f"rescued by {agent}", None, at)
        for record in records:
            self.decisions.outcome(record)

    def _count(self, pair: Pair, name: str, reason: str, seen: datetime | None,
               at: datetime) -> None:
        """``_change`` of the delta "one more ``name``" (plus, with ``seen``, one fresh
        observation seen then), without building it; the caller holds ``self._lock``."""
        before, after = self.book.update(*pair, add_one, name, seen)
        pending = self._deltas.get(pair)
        if pending is None:
            pending = self._deltas[pair] = TrustDelta(*pair)
        setattr(pending, name, getattr(pending, name) + 1)
        if seen is not None:
            pending.observations += 1
            pending.fresh = True
            if pending.at is None or seen > pending.at:
                pending.at = seen
        self._note(pair, before, after, reason, at)

    def _change(self, delta: TrustDelta, reason: str, at: datetime
                ) -> tuple[TrustScores, TrustScores]:
        """Apply ``delta`` to the in-memory counts and buffer it for the store, atomically
        (so a concurrent ``prefetch`` sees either both or neither)."""
        pair = (delta.agent_id, delta.task_type)
        with self._lock:
            before, after = self.book.update(*pair, delta.apply_to)
            pending = self._deltas.get(pair)
            if pending is None:
                self._deltas[pair] = delta
            else:
                pending.merge(delta)
            self._note(pair, before, after, reason, at)
        return before, after

    def _note(self, pair: Pair, before: TrustScores, after: TrustScores, reason: str,
              at: datetime) -> None:
        """Mark a lift back above the deprecation line on the pair's pending delta (the
        store then clears the lifecycle's mark) and count ``reason`` in its next history
        row once its scores moved; the caller holds ``self._lock``."""
        if before.composite < self.options.decay.deprecate_below <= after.composite:
            self._deltas[pair].restored = True
        changed = self._changed.get(pair)
        if changed is not None:
            changed[1][reason] += 1
            self._changed[pair] = (after, changed[1], at)
        elif after != before:
            self._changed[pair] = (after, Counter((reason,)), at)

    def prefetch(self, pairs: Sequence[Pair]) -> None:
        """Load the stored counts of pairs this router has not loaded yet (called from
        ``record`` before the write, never from ``select``)."""
        if not self.book.missing(pairs):
            return
        with self._flush_lock:  # no flush in flight: stored + pending is the whole truth
            missing = self.book.missing(pairs)
            if not missing:
                return
            loaded = self.repo.get_many(missing)
            with self._lock:
                for pair in missing:
                    counts = loaded.get(pair) or TrustCounts()
                    pending = self._deltas.get(pair)
                    if pending is not None:
                        pending.apply_to(counts)
                    scores = self.book.install(pair, counts)
                    if pair in self._changed:
                        _, reasons, at = self._changed[pair]
                        self._changed[pair] = (scores, reasons, at)

    # -- people and signals ---------------------------------------------------------
    def feedback(self, decision_id: str, approved: bool, comment: str | None = None
                 ) -> TrustScores:
        """A person's verdict on one decision; written at once."""
        check_identifier(decision_id, "decision_id")
        found = self.decisions.lookup(decision_id)
        if found is None:
            raise UnknownDecision(decision_id)
        return self._verdict(found, bool(approved), "feedback", comment, decision_id)

    def review(self, agent_id: str, task_type: str, approved: bool,
               comment: str | None = None) -> TrustScores:
        """An explicit review of a pair (approval pins the human score at 0.95)."""
        pair = (check_identifier(agent_id, "agent_id"), check_identifier(task_type, "task_type"))
        return self._verdict(pair, bool(approved), "review", comment, None)

    def _verdict(self, pair: Pair, approved: bool, kind: str, comment: str | None,
                 decision_id: str | None) -> TrustScores:
        at = utc_now()
        self.prefetch([pair])
        pins = True if kind == "review" and approved else None
        delta = TrustDelta(*pair, approvals=int(approved), rejections=int(not approved),
                           reviewed=False if not approved else pins, fresh=True, at=at)
        after = self._change(delta, f"{kind} {'approved' if approved else 'rejected'}", at)[1]
        with self._lock:
            self._feedback.append({"agent_id": pair[0], "task_type": pair[1],
                                   "decision_id": decision_id, "approved": approved,
                                   "kind": kind, "signal": None, "comment": comment, "at": at})
        self.flush()  # a person's verdict is never left in a buffer
        return after

    def signal(self, agent_id: str, task_type: str, name: str,
               at: datetime | None = None) -> TrustScores:
        """A named signal (see profiles.trust.SIGNALS); buffered like executions."""
        pair = (check_identifier(agent_id, "agent_id"), check_identifier(task_type, "task_type"))
        if name not in SIGNALS:
            apply_signal(TrustCounts(), name)  # raises the error naming the known signals
        effect = SIGNALS[name]
        when = at or utc_now()
        self.prefetch([pair])
        delta = TrustDelta(*pair, observations=effect.observations,
                           contradictions=effect.contradictions, positive=effect.positive,
                           negative=effect.negative, approvals=effect.approvals,
                           rejections=effect.rejections,
                           reviewed=False if effect.rejections else None, fresh=True, at=when)
        after = self._change(delta, f"signal {name}", when)[1]
        self.maybe_flush()
        return after

    # -- persistence ----------------------------------------------------------------
    def maybe_flush(self) -> None:
        """Flush when enough is buffered or enough time passed (never raises)."""
        backlog = len(self._deltas) + self.decisions.backlog
        if not backlog:
            return
        if backlog < self.options.flush_every and \
                time.monotonic() - self._last_flush < self.options.flush_seconds:
            return
        try:
            self.flush()
        except Exception as exc:  # the buffers were restored; the next record retries
            log.warning("trust layer: could not write buffered decisions/trust counts: %s", exc)

    def flush(self) -> None:
        """Write every buffered decision, outcome, trust increment and history row."""
        with self._flush_lock:
            with self._lock:
                deltas, self._deltas = self._deltas, {}
                changed, self._changed = self._changed, {}
                feedback, self._feedback = self._feedback, []
                self._last_flush = time.monotonic()
                for pair, delta in deltas.items():
                    if not self.book.missing([pair]):
                        delta.tier = str(self.book.tier(*pair))
            history = [history_row(*pair, scores, _describe(reasons), at)
                       for pair, (scores, reasons, at) in changed.items()]
            try:
                self.decisions.flush()
                self.repo.apply(list(deltas.values()), history, feedback)
            except Exception:
                with self._lock:
                    for pair, delta in deltas.items():
                        later = self._deltas.get(pair)
                        if later is not None:
                            delta.merge(later)
                        self._deltas[pair] = delta
                    for pair, entry in changed.items():
                        self._changed.setdefault(pair, entry)
                    self._feedback[:0] = feedback
                raise

    def reload(self) -> None:
        """Flush, then reload the calibration map and the pairs whose stored tier
        restricts routing (deprecated; core/strong for an exploit-only router). Other
        pairs are loaded on first use (``prefetch``)."""
        self.flush()
        tiers = [str(Tier.DEPRECATED)]
        if self.exploit_only:
            tiers += [str(Tier.CORE), str(Tier.STRONG)]
        with self._flush_lock, self._lock:
            self.book.replace(self.repo.load_tiers(tiers))
        self.decisions.load()

    def close(self) -> None:
        """Flush and stop the hand-off worker."""
        try:
            self.flush()
        finally:
            self.abstain_action.close()

    # -- reading --------------------------------------------------------------------
    def trust(self, agent_id: str, task_type: str) -> TrustScores:
        """The pair's three scores, composite and tier."""
        self.prefetch([(agent_id, task_type)])
        return self.book.scores(agent_id, task_type)


def _candidate_of(item: Any) -> CandidateScore:
    return next(x for x in item if isinstance(x, CandidateScore))


def _with_reason(item: T, candidate: CandidateScore, reason: str) -> T:
    new = replace(candidate, reason=reason)
    return type(item)(new if x is candidate else x for x in item)


def _describe(reasons: Counter[str]) -> str:
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(reasons.items()))

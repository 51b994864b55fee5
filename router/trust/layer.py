"""The trust layer inside a router: tiers on the way in, calibrated confidence on the way
out, counts and history from every committed outcome.

``AgentRouter.select`` calls it three times, none of which touches the database:

- ``admit``: the tier policy moves the candidates it does not admit last (a dict lookup
  per candidate, and nothing at all while no pair is deprecated and exploitation is off);
- ``judge``: calibrated confidence, decision tier and the abstention gates, as a
  ``TrustVerdict`` (pure: nothing is buffered);
- ``settle``: the decision built from that verdict is buffered for the decision log and
  an abstention is acted on (``on_abstain``: ``route_anyway`` returns it flagged,
  ``raise`` releases its slot and raises ``Abstained``, ``human`` stores the hand-off
  request as pending on the caller's thread, so it survives a crash once ``select()``
  returned, then hands it to people through the router's transfer hooks on a worker
  thread, because hooks may do network I/O and ``select()`` must stay fast; ``close()``
  waits for those deliveries at most ``dispatch_close_timeout_s``).

As a ``Learner`` (``trustroute.router.learner``) it ``fold``s committed records into the
trust counts, contradictions and the calibration map, and ``rebuild``s from the store.

Buffered writes go to the store in batches from ``record()`` once ``flush_every`` items
or ``flush_seconds`` have accumulated, and on ``flush()``/``close()``. Feedback and
reviews are written at once: a person's verdict is never left in a buffer.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trustroute.profiles.records import ExecutionRecord, check_identifier, utc_now
from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.trust import TrustRepository
from trustroute.profiles.trust_counts import Pair, TrustCounts, TrustDelta
from trustroute.router.decision import CandidateScore, RoutingDecision
from trustroute.router.errors import UnknownDecision
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest
from trustroute.router.trust.abstention import Abstained, AbstentionPolicy, GateView
from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.decision_log import DecisionLog
from trustroute.router.trust.options import TrustOptions
from trustroute.router.trust.policy import TRUSTED
from trustroute.router.trust.rescues import RescueTracker
from trustroute.router.trust.scores import (
    Tier,
    TrustScores,
    execution_delta,
    outcome_kind,
    signal_delta,
    verdict_delta,
)

log = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class TrustVerdict:
    """How sure the router is of a ranking's first candidate (``TrustLayer.judge``)."""

    confidence: float  # calibrated probability that the chosen agent succeeds
    tier: str  # weak, medium or strong
    abstained: bool
    abstain_reason: str | None  # the name of the gate that fired
    detail: str | None  # that gate's explanation
    raw: float  # the strategy's success estimate before calibration


@dataclass(slots=True)
class _Pending:
    """A pair's buffered change: the merged delta, and the reasons for its history row
    (counted from the first change that moved the scores) with the last one's time."""

    delta: TrustDelta
    reasons: Counter[str]
    at: datetime


class TrustLayer:
    """Per-router trust state, policy and buffered persistence."""

    def __init__(self, store: Store, strategy: str, options: TrustOptions | None = None,
                 abstention: AbstentionPolicy | None = None,
                 transfer: TransferDispatcher | None = None, *,
                 exploit_only: bool = False) -> None:
        self.options = options or TrustOptions()
        self.abstention = abstention or AbstentionPolicy()
        self.exploit_only = exploit_only  # the policy's mode; which pairs rebuild() loads
        self.book = TrustBook(self.options.weights)
        self.rescues = RescueTracker(self.options.rescue_memory)
        self.repo = store.repository(TrustRepository)
        self.decisions = DecisionLog(store.repository(DecisionRepository), strategy, self.options)
        self.transfer = transfer  # where ``on_abstain: human`` hands decisions over
        # hooks may do network I/O: hand-offs are delivered on a worker (started on first use)
        self._handoffs = _HandoffWorker()
        self._lock = threading.Lock()  # the book and the buffers change together
        self._flush_lock = threading.Lock()  # one flush or prefetch at a time
        self._pending: dict[Pair, _Pending] = {}
        self._feedback: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()

    # -- decisions (no I/O) -------------------------------------------------------
    def admit(self, task_type: str, ranked: list[CandidateScore]) -> list[CandidateScore]:
        """``ranked`` with the candidates the tier policy does not admit moved last
        (their reason says why), so the first is admitted and nobody is hidden.
        Raises NoAgentAvailable when no candidate is admitted."""
        return self.options.policy.admit(task_type, ranked, self.book, self.exploit_only)

    def judge(self, task_type: str, ranked: Sequence[CandidateScore]) -> TrustVerdict:
        """Calibrated confidence in the first candidate, its tier and the abstention
        gates' verdict (pure: nothing is buffered)."""
        first = ranked[0].success_probability if ranked else None
        raw = self.options.unknown_probability if first is None else min(1.0, max(0.0, first))
        calibrate = self.decisions.calibration
        confidence = calibrate(raw)
        fired = self.abstention.evaluate(GateView(task_type, ranked, calibrate, confidence))
        reason, detail = fired if fired is not None else (None, None)
        return TrustVerdict(confidence, self.options.confidence_tiers.tier_of(confidence),
                            fired is not None, reason, detail, raw)

    def settle(self, decision: RoutingDecision, verdict: TrustVerdict) -> None:
        """Buffer the decision for the log; carry out ``on_abstain`` when it abstained
        (``raise`` raises Abstained)."""
        self.decisions.remember(decision, verdict.raw, verdict.detail)
        if not verdict.abstained:
            return
        detail = verdict.detail or ""
        if self.abstention.on_abstain == "raise":
            decision.release()
            raise Abstained(decision, detail)
        if self.abstention.on_abstain != "human":
            return
        if self.transfer is None:
            log.warning("on_abstain is 'human' but the router has no transfer dispatcher; "
                        "decision %s routed anyway", decision.decision_id)
            return
        request = self.transfer.accept(TransferRequest.from_decision(  # stored first
            decision, reason=f"{decision.abstain_reason}: {detail}" if detail else None))
        self._handoffs.submit(self.transfer, request)

    # -- learning -----------------------------------------------------------------
    def fold(self, batch: Sequence[tuple[ExecutionRecord, int]]) -> None:
        """Fold committed executions in, in commit order (no I/O): trust counts,
        contradictions (rescues), and each outcome joined with its decision."""
        with self._lock:
            for record, _ in batch:
                agent, task_type, at = record.agent_id, record.task_type, record.timestamp
                kind = outcome_kind(record.success, record.effective_quality)
                self._change(execution_delta(agent, task_type, kind, at),
                             f"execution {kind}", at)
                for rescued in self.rescues.observe(agent, task_type, record.success,
                                                    record.metadata):
                    self._change(TrustDelta(*rescued, contradictions=1),
                                 f"rescued by {agent}", at)
        for record, _ in batch:
            self.decisions.outcome(record)

    def rebuild(self, store: Store) -> None:
        """Flush, then reload the calibration map and the pairs whose stored tier
        restricts routing (deprecated; core/strong for an exploit-only layer). Other
        pairs are loaded on first use (``prefetch``). ``store`` is the one this layer
        was built on (its repositories are bound to it)."""
        self.flush()
        tiers = [Tier.DEPRECATED, *(TRUSTED if self.exploit_only else ())]
        with self._flush_lock, self._lock:
            self.book.replace(self.repo.load_tiers([str(t) for t in tiers]))
        self.decisions.load()

    def _change(self, delta: TrustDelta, reason: str, at: datetime) -> TrustScores:
        """Apply ``delta`` to the in-memory counts and buffer it for the store; count
        ``reason`` in the pair's next history row once its scores moved, and mark a lift
        back above the deprecation line (the store then clears the lifecycle's mark).
        The caller holds ``self._lock``, so a concurrent ``prefetch`` sees both or
        neither. Returns the pair's scores after."""
        before, after = self.book.update(delta)
        pending = self._pending.get(delta.pair)
        if pending is None:
            pending = self._pending[delta.pair] = _Pending(delta, Counter(), at)
        else:
            pending.delta.merge(delta)
        if before.composite < self.options.decay.deprecate_below <= after.composite:
            pending.delta.restored = True
        if pending.reasons or after != before:
            pending.reasons[reason] += 1
            pending.at = at
        return after

    def prefetch(self, pairs: Sequence[Pair]) -> None:
        """Load the stored counts of pairs this layer has not loaded yet (called before
        a write that will change them, never from ``select``)."""
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
                    if pair in self._pending:
                        self._pending[pair].delta.apply_to(counts)
                    self.book.install(pair, counts)

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
        delta = verdict_delta(*pair, approved, at, review=kind == "review")
        with self._lock:
            after = self._change(delta, f"{kind} {'approved' if approved else 'rejected'}", at)
            self._feedback.append({"agent_id": pair[0], "task_type": pair[1],
                                   "decision_id": decision_id, "approved": approved,
                                   "kind": kind, "comment": comment, "at": at})
        self.flush()  # a person's verdict is never left in a buffer
        return after

    def signal(self, agent_id: str, task_type: str, name: str) -> TrustScores:
        """A named signal (see ``scores.SIGNALS``); buffered like executions."""
        pair = (check_identifier(agent_id, "agent_id"), check_identifier(task_type, "task_type"))
        at = utc_now()
        delta = signal_delta(*pair, name, at)  # raises for an unknown name
        self.prefetch([pair])
        with self._lock:
            after = self._change(delta, f"signal {name}", at)
        self.maybe_flush()
        return after

    # -- persistence ----------------------------------------------------------------
    def maybe_flush(self) -> None:
        """Flush when enough is buffered or enough time passed (never raises)."""
        backlog = len(self._pending) + self.decisions.backlog
        if not backlog or (backlog < self.options.flush_every and
                           time.monotonic() - self._last_flush < self.options.flush_seconds):
            return
        try:
            self.flush()
        except Exception as exc:  # the buffers were restored; the next record retries
            log.warning("trust layer: could not write buffered decisions/trust counts: %s", exc)

    def flush(self) -> None:
        """Write every buffered decision, outcome, trust increment and history row."""
        with self._flush_lock:
            with self._lock:
                pending, self._pending = self._pending, {}
                feedback, self._feedback = self._feedback, []
                self._last_flush = time.monotonic()
                history = []
                for pair, p in pending.items():
                    if not self.book.missing([pair]):
                        p.delta.tier = str(self.book.scores(*pair).tier)
                    if p.reasons:  # the book holds the scores after the last change
                        history.append(history_row(*pair, self.book.scores(*pair),
                                                   _describe(p.reasons), p.at))
            try:
                self.decisions.flush()
                self.repo.apply([p.delta for p in pending.values()], history, feedback)
            except Exception:
                with self._lock:
                    for pair, p in pending.items():
                        later = self._pending.get(pair)
                        if later is not None:
                            p.delta.merge(later.delta)
                            p.reasons.update(later.reasons)
                            p.at = later.at if later.reasons else p.at
                        self._pending[pair] = p
                    self._feedback[:0] = feedback
                raise

    def close(self) -> None:
        """Flush, wait for hand-offs in flight at most the dispatcher's
        ``dispatch_close_timeout_s`` and stop their worker (idempotent); what is not
        delivered by then stays pending in the store (``trustroute handoffs --retry``)."""
        try:
            self.flush()
        finally:
            bound = None if self.transfer is None else (
                self.transfer.settings.dispatch_close_timeout_s)
            self._handoffs.close(bound or 0.0)

    # -- reading --------------------------------------------------------------------
    def trust(self, agent_id: str, task_type: str) -> TrustScores:
        """The pair's three scores, composite and tier."""
        self.prefetch([(agent_id, task_type)])
        return self.book.scores(agent_id, task_type)


def history_row(agent_id: str, task_type: str, scores: TrustScores, reason: str,
                at: datetime) -> dict[str, Any]:
    """One confidence-history entry (table ``trust_history``)."""
    return {"agent_id": agent_id, "task_type": task_type, **scores.as_dict(),
            "reason": reason, "at": at}


def _describe(reasons: Counter[str]) -> str:
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(reasons.items()))


class _HandoffWorker:
    """One daemon thread delivering stored hand-off requests in order. Daemon, so a hook
    that hangs delays neither ``close()`` past its bound nor the interpreter's exit: the
    request was stored before it was queued and stays pending."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[TransferDispatcher, TransferRequest] | None] = (
            queue.Queue())
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, transfer: TransferDispatcher, request: TransferRequest) -> None:
        with self._lock:
            if self._closed:
                log.warning("hand-off %s stored pending: the router is closed, it is not "
                            "delivered now", request.request_id)
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="trustroute-handoff")
                self._thread.start()
            self._queue.put((transfer, request))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                item[0].deliver(item[1])
            except Exception as exc:  # the worker must outlive a failing hook
                log.error("hand-off %s after abstention failed (it stays pending): %s",
                          item[1].request_id, exc)

    def close(self, timeout_s: float) -> None:
        with self._lock:
            thread, self._closed = self._thread, True
        if thread is None:
            return
        self._queue.put(None)  # after everything queued: deliver what fits in the bound
        thread.join(timeout_s)
        if thread.is_alive():
            log.warning("close(): hand-off deliveries still running after %.1f s; what they "
                        "did not deliver stays pending (trustroute handoffs --retry)",
                        timeout_s)

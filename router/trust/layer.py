"""The trust layer inside a router: trust counts folded from the log, what people and
signals say, and the ``gate`` a decision passes (``gate.py``: tiers on the way in,
calibrated confidence and abstention on the way out; docs/trust.md, "Inside the router").

As a ``Learner`` it folds placed executions into the trust counts and ``rebuild``s them
from the whole log. What people and signals say is appended at
once (nothing a person said waits in a buffer); only derived rows are buffered: the
decision log and the confidence history of this router's own changes, written from
``record()`` once ``flush_every`` items or ``flush_seconds`` have accumulated, and on
``flush()``/``close()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from trustroute.profiles.records import ExecutionRecord, check_identifier, check_text, utc_now
from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.executions import origin_of
from trustroute.profiles.store.trust import ARCHIVE, LIFECYCLE, PEOPLE, TrustRepository
from trustroute.profiles.trust_counts import Pair, TrustCounts, TrustDelta
from trustroute.router.feedback.policy import FeedbackPolicy
from trustroute.router.feedback.state import Change, FeedbackState, Human
from trustroute.router.frontier import Frontier
from trustroute.router.handoff.transfer import TransferDispatcher
from trustroute.router.trust.abstention import AbstentionPolicy
from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.decision_log import DecisionLog
from trustroute.router.trust.gate import TrustGate
from trustroute.router.trust.history import History, describe, history_row
from trustroute.router.trust.options import TrustOptions
from trustroute.router.trust.rescues import RescueTracker
from trustroute.router.trust.scores import (
    TrustScores,
    execution_delta,
    human_delta,
    kind_delta,
    outcome_kind,
    signal_delta,
    verdict_delta,
)

if TYPE_CHECKING:
    from trustroute.profiles.book import ProfileBook

log = logging.getLogger(__name__)


class TrustLayer:
    """Per-router trust state and policy, folded from the log."""

    def __init__(self, store: Store, strategy: str, options: TrustOptions | None = None,
                 abstention: AbstentionPolicy | None = None,
                 transfer: TransferDispatcher | None = None, *,
                 exploit_only: bool = False, feedback: FeedbackState | None = None) -> None:
        #: Verdicts per execution (shared with the router's projection, which folds them).
        self.feedback = feedback or FeedbackState(FeedbackPolicy())
        #: Held around every fold (the router's lock: feedback changes the profile book).
        self.outer: threading.RLock = threading.RLock()
        #: Applies quality changes to the profile book and the strategy (the projection).
        self.on_amend: Callable[[list[Change]], None] = lambda changes: None
        self.options = options or TrustOptions()
        self.book = TrustBook(self.options.weights)
        self.rescues = RescueTracker(self.options.rescue_memory)
        self.repo = store.repository(TrustRepository)
        self.decisions = DecisionLog(store.repository(DecisionRepository), strategy, self.options)
        if transfer is not None:  # undeliverable hand-offs are kept pending in the store
            transfer.bind_store(store)
        #: What ``select`` asks on the decision's path (tiers, confidence, abstention).
        self.gate = TrustGate(self.book, self.decisions, self.options,
                              abstention or AbstentionPolicy(), transfer,
                              exploit_only=exploit_only)
        self._lock = threading.Lock()  # the book and the history buffer change together
        self._flush_lock = threading.Lock()  # one flush at a time
        self._history: dict[Pair, History] = {}
        self._own: set[str] = set()  # ids of this router's writes, until folded
        self._out_of_scale: set[str] = set()  # feedback keys already warned about
        #: Per log table this layer follows, per writer, what it folded (or read).
        self.people, self.marks, self.archive = Frontier(), Frontier(), Frontier()
        self.people_total = 0  # people rows folded
        #: The writers' counters read before the log a rebuild folds (set by the router).
        self.base: Mapping[str, Mapping[str, int]] = {}
        self._last_flush = time.monotonic()

    # -- learning (no I/O) ----------------------------------------------------------
    def expect(self, record_ids: Sequence[str]) -> None:
        """Mark records this router is writing: their changes go into its confidence
        history and their outcomes are joined with its decisions."""
        with self._lock:
            self._own.update(record_ids)

    def fold(self, batch: Sequence[tuple[ExecutionRecord, int]]) -> None:
        """Fold placed executions into the trust counts and contradictions."""
        own = []
        with self._lock:
            for record, _ in batch:
                mine = record.record_id in self._own
                self._own.discard(record.record_id)
                if mine:
                    own.append(record)
                self._fold_execution(record, mine)
            self._fold_human(self.feedback.take_human(), None)
        for record in own:
            self.decisions.outcome(record)

    def _fold_execution(self, record: ExecutionRecord, mine: bool) -> None:
        agent, task_type, at = record.agent_id, record.task_type, record.timestamp
        known, quality = self.feedback.quality_of(record.record_id)
        kind = "unjudged" if known and quality is None else outcome_kind(
            record.success, quality if known and quality is not None
            else record.effective_quality)
        self._change(execution_delta(agent, task_type, kind, at), f"execution {kind}", at, mine)
        for r in self.rescues.observe(agent, task_type, record.success, record.metadata,
                                      (at.timestamp(), record.record_id)):
            when = at if r.at is None else datetime.fromtimestamp(r.at, UTC)  # the rescue's
            self._change(TrustDelta(r.agent_id, r.task_type, contradictions=1, at=when),
                         f"rescued by {r.rescuer}", when, mine)

    def rebuild(self, book: ProfileBook, placed: Sequence[tuple[ExecutionRecord, int]],
                store: Store) -> None:
        """Fold the whole log again: executions (``placed``), what people and signals
        said, the lifecycle's marks; reload the calibration map. The frontiers start at
        ``base``, the counters read before the log was."""
        frontiers = {t: Frontier(self.base.get(t, {})) for t in (PEOPLE, LIFECYCLE, ARCHIVE)}
        self.restore({}, 0, frontiers, placed, self.repo.people())

    def restore(self, counts: dict[Pair, TrustCounts], people_total: int,
                frontiers: Mapping[str, Frontier],
                placed: Sequence[tuple[ExecutionRecord, int]] = (),
                rows: Sequence[dict[str, Any]] = (), rescues: Sequence[Any] = ()) -> None:
        """Take a cached projection's trust counts (``people_total`` people rows folded
        into them, ``frontiers`` per followed table) and its rescue tracker's tasks
        (``rescues``, ``RescueTracker.export()``), fold ``placed`` executions, people's
        ``rows`` and the lifecycle's marks on top; reload the calibration map."""
        self.flush()
        lifecycle = self.repo.lifecycle()
        with self._flush_lock, self._lock:
            self.book.reset(counts)
            self.rescues = RescueTracker.load(list(rescues), self.options.rescue_memory)
            self.people = frontiers.get(PEOPLE) or Frontier()
            self.marks = frontiers.get(LIFECYCLE) or Frontier()
            self.archive = frontiers.get(ARCHIVE) or Frontier()
            self.people_total = people_total
            for record, _ in placed:
                self._fold_execution(record, False)
            self._fold_human(self.feedback.take_human(), None)
            for row in rows:  # the whole table: each is folded, numbered or not
                self.people.add(origin_of(row))
                self._apply_person(row, False)
            self._mark(lifecycle)
        self.decisions.load()

    def frontiers(self) -> dict[str, dict[str, Any]]:
        """What this layer folded, per followed table (for the cached projection)."""
        with self._lock:
            return {PEOPLE: self.people.export(), LIFECYCLE: self.marks.export(),
                    ARCHIVE: self.archive.export()}

    def catch_up(self, counters: Mapping[str, Mapping[str, int]],
                 repo: TrustRepository | None = None) -> bool:
        """Fold what other processes' people and signals said and the lifecycle marks
        they changed, by the writers' ``counters``, read through ``repo`` (default: the
        router's); True when a pair was retired since the last rebuild (rebuild the
        router: that resets the retirements' frontier)."""
        repo = repo or self.repo
        for writer, after, upto in self.people.behind(counters.get(PEOPLE, {})):
            for page in repo.people_written(writer, after, upto):
                with self.outer, self._lock:
                    for row in page:
                        self._fold_person(row, False)
            with self.outer, self._lock:
                self.people.settle(writer, upto)
        for writer, after, upto in self.marks.behind(counters.get(LIFECYCLE, {})):
            for page in repo.marks_written(writer, after, upto):
                with self.outer, self._lock:
                    self._mark(page)
            with self.outer, self._lock:
                self.marks.settle(writer, upto)
        return bool(self.archive.behind(counters.get(ARCHIVE, {})))

    def _fold_person(self, row: dict[str, Any], mine: bool) -> TrustScores:
        """Fold one row of ``trust_feedback`` (once: by its writer and number); returns
        the pair's scores after."""
        if not self.people.add(origin_of(row)):
            return self.book.scores(row["agent_id"], row["task_type"])
        return self._apply_person(row, mine)

    def _apply_person(self, row: dict[str, Any], mine: bool) -> TrustScores:
        pair = (row["agent_id"], row["task_type"])
        self.people_total += 1
        at, kind = row["at"], row["kind"]
        if kind == "feedback":
            return self._fold_verdict(row, mine)
        if kind == "signal":
            delta, reason = signal_delta(*pair, row["signal"], at), f"signal {row['signal']}"
        else:
            approved = bool(row["approved"])
            delta = verdict_delta(*pair, approved, at, review=kind == "review")
            reason = f"{kind} {'approved' if approved else 'rejected'}"
        return self._change(delta, reason, at, mine)

    def _fold_verdict(self, row: dict[str, Any], mine: bool) -> TrustScores:
        """Fold a verdict on an execution: its quality, and the pair's human counts."""
        try:
            changes, human = self.feedback.verdict(row, utc_now().timestamp())
        except ValueError as exc:  # a score outside what this router's policy takes
            key = row.get("key") or "user"
            if key not in self._out_of_scale:  # once per key: a store may hold thousands
                self._out_of_scale.add(key)
                log.warning("feedback %s not folded: %s; later verdicts of key %r that are "
                            "not folded are not reported", row["id"], exc, key)
            return self.book.scores(row["agent_id"], row["task_type"])
        self._fold_human(human, row["at"], mine)
        self.amended(changes, row["at"], mine)
        return self.book.scores(row["agent_id"], row["task_type"])

    def _fold_human(self, human: Sequence[Human], at: datetime | None,
                    mine: bool = False) -> None:
        for h in human:
            self._change(human_delta(h.agent_id, h.task_type, h.approvals, h.rejections, at),
                         f"feedback {'rejected' if h.rejections > 0 else 'approved'}",
                         at or utc_now(), mine)

    def amended(self, changes: Sequence[Change], at: datetime | None = None,
                mine: bool = False) -> None:
        """Quality changes of executions (a verdict, or ``default`` after the wait):
        their outcome kind moves in the trust counts, then the book and the strategy
        learn of them (the caller holds ``outer`` and ``self._lock``)."""
        for c in changes:
            old, new = (outcome_kind(c.run.success, q) if q is not None else None
                        for q in (c.old, c.new))
            if old != new:
                self._change(kind_delta(c.run.agent_id, c.run.task_type, old, new, at),
                             f"execution {new or 'unjudged'}", at or utc_now(), mine)
        if changes:
            self.on_amend(list(changes))

    def settle_due(self, now: datetime) -> None:
        """Settle by the policy's ``default`` the pending runs whose wait is over."""
        if self.feedback.next_due() > now.timestamp():
            return
        with self.outer, self._lock:
            self.amended(self.feedback.settle_due(now.timestamp()))

    def _mark(self, rows: Sequence[dict[str, Any]]) -> None:
        for row in rows:
            self.book.set_decay((row["agent_id"], row["task_type"]), tuple(row["decay"]),
                                row.get("decayed_at"), row.get("deprecated_at"))

    def _change(self, delta: TrustDelta, reason: str, at: datetime, mine: bool
                ) -> TrustScores:
        """Apply ``delta`` to the counts; for this router's own changes count ``reason``
        in the pair's next history row once its scores moved. The caller holds
        ``self._lock``. Returns the pair's scores after."""
        before, after = self.book.update(delta)
        if mine:
            entry = self._history.setdefault(delta.pair, History(Counter(), at))
            if entry.reasons or after != before:
                entry.reasons[reason] += 1
                entry.at = at
        return after

    # -- people and signals (appended at once) --------------------------------------
    def give(self, row: dict[str, Any], row_id: str | None) -> tuple[TrustScores, bool]:
        """Store a row of what people said (a verdict, ``giving.verdict_row``; a review or
        signal, ``pair_row``) under the client's id (a new one when None) and fold it;
        the pair's scores after, and whether this call stored it."""
        stored, new = self.repo.append(row, row_id)
        with self.outer, self._lock:
            after = self._fold_person(stored, True)
        self.maybe_flush()
        return after, new

    def review(self, agent_id: str, task_type: str, approved: bool,
               comment: str | None = None) -> TrustScores:
        """An explicit review of a pair (approval pins the human score at 0.95)."""
        return self.give(pair_row(agent_id, task_type, "review", utc_now(), approved=approved,
                                  comment=comment), None)[0]

    def signal(self, agent_id: str, task_type: str, name: str) -> TrustScores:
        """A named signal (see ``scores.SIGNALS``); stored before it returns."""
        return self.give(pair_row(agent_id, task_type, "signal", utc_now(), signal=name),
                         None)[0]

    # -- persistence of derived rows --------------------------------------------------
    def maybe_flush(self) -> None:
        """Flush when enough is buffered or enough time passed (never raises)."""
        backlog = len(self._history) + self.decisions.backlog
        if not backlog or (backlog < self.options.flush_every and
                           time.monotonic() - self._last_flush < self.options.flush_seconds):
            return
        try:
            self.flush()
        except Exception as exc:  # the buffers were restored; the next record retries
            log.warning("trust layer: could not write the decision log or history: %s", exc)

    def flush(self) -> None:
        """Write buffered decisions, outcomes and confidence-history rows."""
        with self._flush_lock:
            with self._lock:
                pending, self._history = self._history, {}
                self._last_flush = time.monotonic()
                rows = [history_row(*pair, self.book.scores(*pair), describe(h.reasons), h.at)
                        for pair, h in pending.items() if h.reasons]
            try:
                self.decisions.flush()
                self.repo.append_history(rows)
            except Exception:
                with self._lock:
                    for pair, h in pending.items():
                        later = self._history.get(pair)
                        if later is not None:
                            h.reasons.update(later.reasons)
                            h.at = later.at
                        self._history[pair] = h
                raise

    def close(self, flush: bool = True) -> None:
        """Flush (``flush=False``: the store did not answer; a warning counts what is
        lost), then close the gate (hand-offs in flight get their time; idempotent)."""
        try:
            if flush:
                self.flush()
            elif lost := len(self._history) + self.decisions.backlog:
                log.warning("the store did not answer: %d buffered rows not written", lost)
        finally:
            self.gate.close()


def pair_row(agent_id: str, task_type: str, kind: str, at: datetime, *,
             approved: bool | None = None, signal: str | None = None,
             comment: str | None = None) -> dict[str, Any]:
    """The checked ``trust_feedback`` row of a review (``approved``, a bool) or a signal
    (``signal``, a name in ``scores.SIGNALS``) of a pair, said ``at``."""
    pair = (check_identifier(agent_id, "agent_id"), check_identifier(task_type, "task_type"))
    if kind == "review":
        if not isinstance(approved, bool):  # "false" or None is no verdict
            raise TypeError(f"approved must be True or False, got {type(approved).__name__}")
        if comment is not None:
            check_text(comment, "comment")
    elif kind == "signal":
        signal_delta(*pair, str(signal), at)  # raises for an unknown name
    else:
        raise ValueError(f"kind must be 'review' or 'signal', got {kind!r}")
    return {"agent_id": pair[0], "task_type": pair[1], "kind": kind, "at": at,
            "approved": approved if kind == "review" else None,
            "comment": comment if kind == "review" else None, "decision_id": None,
            "signal": signal if kind == "signal" else None}

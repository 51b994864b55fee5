"""A router's learned state as a projection of the store's log, kept up to date.

Everything a router knows (the profile book, the strategy, the trust counts) is folded
from log rows: its own writes as soon as they commit, other processes' rows as it
catches up, and the whole log when it opens or ``refresh()``es. Each row is folded once.
What a router has folded is a ``Frontier`` per log table: per writer, the rows numbered
up to its mark (and the few above it); stamps order the log, they never decide what was
seen. Catching up reads the writers' counters (O(writers)) and fetches, per writer
whose counter is ahead, exactly the numbers it lacks (docs/storage.md, "Following the
log").

Against a server a daemon thread catches up every ``sync_delay_s / 4``, so a router sees
what other processes recorded within ``sync_delay_s`` (after the rows' commit, however
late that is) without anyone calling ``refresh()``. Embedded stores have one writing
process (the path lock), so nothing is polled there.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from trustroute.profiles.book import Judge, ProfileBook
from trustroute.profiles.profile import WindowEntry
from trustroute.profiles.records import ExecutionRecord, utc_now
from trustroute.profiles.store import Store, StoreUnavailableError
from trustroute.profiles.store.executions import ExecutionRepository, LogKey, LogRow
from trustroute.profiles.store.projections import ProjectionRepository
from trustroute.profiles.store.trust import PEOPLE, TrustRepository
from trustroute.router import checkpoint
from trustroute.router.feedback.state import Change, FeedbackState, Run
from trustroute.router.frontier import Frontier
from trustroute.router.learner import Learner, StrategyLearner

if TYPE_CHECKING:
    from trustroute.router.trust.layer import TrustLayer

log = logging.getLogger(__name__)
CACHE_AFTER = 10_000  # an open that read this many rows writes the projection at once
FOLD_BATCH = 5000  # rows fetched while catching up are folded this many at a time
EXECUTION = "execution"
#: What an unreadable cache raises while it is decoded (it is then ignored).
UNREADABLE = (ValueError, KeyError, TypeError, IndexError, AttributeError)


def same_execution(a: ExecutionRecord, b: ExecutionRecord) -> bool:
    """True when two records under one id say the same thing (a resent write)."""
    return (a.agent_id, a.task_type, a.success, a.effective_quality, a.timestamp) == (
        b.agent_id, b.task_type, b.success, b.effective_quality, b.timestamp)


class LogProjection:
    """The book and the learners, folded from the log; follows other processes."""

    def __init__(self, store: Store, book: ProfileBook, strategy: StrategyLearner,
                 trust: TrustLayer, lock: threading.RLock, feedback: FeedbackState) -> None:
        self.store = store
        self.book = book
        self.strategy = strategy
        self.trust = trust
        #: Verdicts per execution; decides each placed record's quality evidence.
        self.feedback = feedback
        trust.outer = lock  # folding a verdict changes the book: under the router's lock
        trust.on_amend = self._amend
        #: Folded in this order after every placement, rebuilt in this order.
        self.learners: list[Learner] = [strategy, trust]
        #: Per writer, which execution rows are folded.
        self.frontier = Frontier()
        self._lock = lock  # the router's: select() reads what this changes
        self._writing = threading.RLock()  # a write and its fold exclude a rebuild
        self._total = 0  # rows folded
        self._since_cached = 0  # rows folded since the cached projection was read/written
        self._cache = store.repository(ProjectionRepository)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- folding ---------------------------------------------------------------------
    def append(self, records: Sequence[ExecutionRecord]) -> list[LogRow]:
        """Write this router's records to the log (one write) and fold them; returns the
        rows folded. A record whose id is stored already is folded only when an earlier
        try of the same record stored it without this router folding it (its answer was
        lost); otherwise it is left out (a duplicate)."""
        with self._writing:
            stored = self.store.executions.record_many(records)
            rows = {r.record_id: row for r, row in zip(records, stored, strict=True)
                    if row is not None}
            if again := [r for r in records if r.record_id not in rows]:
                found = self.store.executions.stored(list({r.record_id for r in again}))
                for r in again:
                    row = found.pop(r.record_id, None)
                    if row is not None and not self.frontier.has(row.origin) and \
                            same_execution(row.record, r):
                        rows[r.record_id] = row
            self.trust.expect(list(rows))  # its changes enter this router's history
            self.fold(list(rows.values()))
        if self._since_cached >= self.store.settings.projection_every:
            self.save()
        return list(rows.values())

    def fold(self, rows: Sequence[LogRow], settle: Sequence[tuple[str, int]] = ()) -> int:
        """Fold the rows not folded yet, in log order; then count every row of each
        ``(writer, n)`` in ``settle`` numbered up to n as folded (a look fetched them
        all). Returns how many rows were new."""
        with self._writing, self._lock:
            fresh = sorted((r for r in rows if self.frontier.add(r.origin)),
                           key=lambda r: r.key)
            for writer, upto in settle:
                self.frontier.settle(writer, upto)
            if not fresh:
                return 0
            self._total += len(fresh)
            self._since_cached += len(fresh)
            now = utc_now()
            placed, in_order = self.book.place(fresh, self._judge(now.timestamp()))
            try:
                for learner in self.learners:
                    learner.fold(placed)
                if not in_order:  # incremental evidence assumes log order: derive it again
                    self.strategy.rebuild(self.book, placed, self.store)
                self.trust.settle_due(now)
            except BaseException:  # (Ctrl-C too) folded part-way: the learners disagree
                self.book.stale = True  # with the book; rebuilt, never saved as the cache
                raise
        return len(fresh)

    def _judge(self, now: float) -> Judge:
        """What decides each placed record's quality evidence: the feedback state."""
        def judge(record: ExecutionRecord, seq: int, key: LogKey
                  ) -> tuple[float | None, bool]:
            run = Run(record.record_id, record.agent_id, record.task_type,
                      record.timestamp.timestamp(), record.success,
                      record.effective_quality if record.quality_given else None, seq, key)
            self.feedback.place(run, now)
            self.feedback.join_decision(run, record.decision_id, now)
            return run.quality, run.pending
        return judge

    def _amend(self, changes: list[Change]) -> None:
        """Quality changes of executions reach the book (the run keeps its place in
        its window) and the strategy's evidence (the caller holds the router's lock)."""
        for c in changes:
            run = c.run
            held = self.book.amend(run.agent_id, run.task_type, run.seq, run.timestamp,
                                   run.key, (c.old, c.was_pending), (c.new, run.pending))
            old, new = held or (WindowEntry(run.timestamp, c.old, run.success, run.seq),
                                WindowEntry(run.timestamp, c.new, run.success, run.seq))
            self.strategy.amend(run.agent_id, run.task_type,
                                old if c.old is not None else None,
                                new if c.new is not None else None)

    def rebuild(self, *, cached: bool = False) -> None:
        """Rebuild the book and every learner from the log. ``cached``: start from the
        store's cached projection when it verifies against the log, then fold the rows
        stored after it; otherwise (or when it does not verify) read the whole log."""
        # no write of this router's may slip between read and swap
        with self._writing, collector_paused():
            if not (cached and self._restore()):
                # The counters first: every row they count is in the scan (or deleted);
                # rows committed during the scan are in it too, and are not folded again.
                counters = self.store.executions.counters()
                rows = self.store.executions.scan()  # read without holding up select()
                with self._lock:
                    self.book.clear()
                    self.frontier = Frontier(counters.get(EXECUTION, {}))
                    for row in rows:
                        self.frontier.add(row.origin)
                    self.feedback.clear()
                    self.feedback.remember_all(True)  # every verdict finds its run
                    try:
                        placed, _ = self.book.place(rows, self._judge(utc_now().timestamp()))
                        self.trust.base = counters
                        for learner in self.learners:
                            learner.rebuild(self.book, placed, self.store)
                        # the verdicts the trust layer folded amended the strategy one by
                        # one; derive it from the final book, as an open from the cache does
                        self.strategy.rebuild(self.book, placed, self.store)
                    finally:
                        self.feedback.remember_all(False)
                    self.feedback.take_missed()  # not in the scan: joined when folded
                    self._total = self._since_cached = len(rows)
        if cached and self._since_cached >= CACHE_AFTER:
            self.save()  # the next router to open reads the projection, not the log

    def _restore(self) -> bool:
        """Start from the cached projection if it is readable and verifies against the
        log; True when it did (then the rows written after it are folded too)."""
        try:
            stored = self._cache.read()
            if stored is None:
                return False
            _, meta, chunks = stored
            cp = checkpoint.load(meta, chunks, self.book.window_size)
            if cp is None:
                log.info("the cached projection has another window size: reading the "
                         "whole log")
                return False
            if not self._feedback_fits(cp.feedback):
                return False
            frontiers = {t: Frontier.load(f) for t, f in cp.frontiers.items()}
            claimed = {(s.agent_id, s.task_type): s.executions_total for s in cp.states
                       if s.executions_total}
            numbered, rows = self._cache.totals()
        except UNREADABLE as exc:
            log.warning("the cached projection is unreadable (%s: %s): reading the whole "
                        "log", type(exc).__name__, exc)
            return False
        found = {table: _within(frontiers.get(table, Frontier()), numbered.get(table, {}),
                                rows[table]) for table in rows}
        cached = {EXECUTION: sum(claimed.values()), PEOPLE: cp.people_total}
        if found != cached:
            log.warning("the cached projection does not match the log (%s): reading the "
                        "whole log", _difference(cached, found))
            return False
        with self._lock:
            self.book.restore(cp.states, cp.clocks, cp.tails)
            if cp.feedback is None:
                self.feedback.clear()
            else:
                self.feedback.load(cp.feedback)
            self.frontier = frontiers.pop(EXECUTION)
            self.trust.restore(cp.trust, cp.people_total, frontiers, rescues=cp.rescues)
            self._total = sum(claimed.values())
            self._since_cached = 0
            self.strategy.rebuild(self.book, [], self.store)
        after, retired = self._look()  # rows stored after it was written (verdicts too)
        self.trust.settle_due(utc_now())  # runs whose wait ended since it was written
        if retired or self.book.stale:
            return False
        if self.strategy.amended:  # they amended it one by one: derive it from the final
            with self._lock:  # book, as a whole-log read does
                self.strategy.rebuild(self.book, [], self.store)
        log.info("opened from the cached projection (%d executions), then folded %d "
                 "stored after it", sum(claimed.values()), after)
        return True

    def _feedback_fits(self, carried: dict[str, Any] | None) -> bool:
        """Whether a cache's feedback state (None: it carries none) serves this router:
        folded under the same policy, or, carrying none, for a store without verdicts
        read under a policy without pending runs."""
        if carried is None:
            if self.feedback.policy.wait_s > 0 or self.trust.repo.has_verdicts():
                log.info("the cached projection carries no feedback state, and verdicts "
                         "or pending runs need one: reading the whole log")
                return False
            return True
        if not self.feedback.same_policy(carried):
            log.info("the cached projection was folded under another feedback policy: "
                     "reading the whole log")
            return False
        return True

    def save(self) -> bool:
        """Write what this router folded as the store's cached projection (when it
        folded anything since it read or wrote one). Against a server it looks once
        more first. It records, per writer and log table, how far it folded: the next
        router to open checks that against the log and folds what came after. False when
        the store did not answer (it is a cache: only logged)."""
        if not self._since_cached:
            return True
        try:
            self.recall()
            if self.store.location.is_remote:
                self._look()
            with self._writing, self._lock:
                if self.book.stale:
                    return True  # a rebuild is due: the next open reads the log
                states, clocks, tails = self.book.export()
                frontiers = {EXECUTION: self.frontier.export(), **self.trust.frontiers()}
                settled = checkpoint.horizon(tails)
                meta, chunks = checkpoint.dump(checkpoint.Checkpoint(
                    settled, states, clocks, tails, self.trust.book.all_counts(), frontiers,
                    self.trust.people_total, self.book.window_size,
                    self.feedback.export() if self.feedback.carried else None,
                    self.trust.rescues.export()))
                self._cache.write(chunks, meta, datetime.fromtimestamp(max(0.0, settled), UTC),
                                  self._total, self.trust.people_total)
                self._since_cached = 0
        except Exception as exc:  # a cache: the next open reads the log instead
            log.warning("could not write the cached projection: %s", exc)
            return not isinstance(exc, StoreUnavailableError)
        return True

    def catch_up(self, *, rebuild: bool = True) -> int:
        """Fold what other processes stored since the last look; returns how many
        execution rows were new. Rebuilds when a row arrived too late to be placed
        (or a pair was retired)."""
        total, retired = self._look()
        if rebuild and (retired or self.book.stale):
            log.info("rebuilding from the log: %s", "a pair was retired" if retired else
                     "a row arrived older than the seqs the book remembers")
            self.rebuild()
        return total

    def _look(self) -> tuple[int, bool]:
        """One look: the writers' counters, then per writer the rows it lacks (paged,
        folded in log order a batch at a time); people's rows and the lifecycle's
        marks likewise. Returns (execution rows folded, whether a pair was retired)."""
        reader = self.store.reader()  # its own connection: record() never waits behind it
        counters = reader.executions.counters()
        total, pending, done = 0, [], []
        for writer, after, upto in self.frontier.behind(counters.get(EXECUTION, {})):
            for page in reader.executions.written(writer, after, upto):
                pending += page
                if len(pending) >= FOLD_BATCH:  # catching up far stays in bounded memory
                    total += self.fold(pending)
                    pending = []
            done.append((writer, upto))
        total += self.fold(pending, done)
        retired = self.trust.catch_up(counters, reader.repository(TrustRepository))
        self.recall(reader.executions)
        return total, retired

    def recall(self, executions: ExecutionRepository | None = None) -> None:
        """Verdicts folded on executions this router no longer remembers (it folded
        them longer ago than the last ``FeedbackState.memory`` runs, or before it opened
        from a cached projection that carried no runs): a rebuild amends them, by the
        follower at its next look, or now when nothing follows (an embedded store). A
        verdict whose execution is not folded yet is left alone: it joins the execution
        when that arrives."""
        with self._lock:
            missed = self.feedback.take_missed()
        if not missed:
            return
        try:
            rows = (executions or self.store.executions).stored(sorted(set(missed)))
        except Exception as exc:  # the verdict is stored: look again at the next call
            log.warning("could not look up executions of late verdicts: %s", exc)
            with self._lock:
                self.feedback.missed += missed
            return
        if any(self.frontier.has(row.origin) for row in rows.values()):
            log.info("a verdict on an execution folded before the last %d: rebuilding "
                     "from the log", self.feedback.memory)
            with self._lock:
                self.book.stale = True
            if self._thread is None:  # no follower will: rebuild now (a rebuild
                self.rebuild()        # remembers the runs, so this happens once)

    # -- following ---------------------------------------------------------------------
    def follow(self) -> None:
        """Start the daemon thread that catches up every ``sync_delay_s / 4``."""
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="trustroute-follow")
        self._thread.start()

    def _run(self) -> None:
        period = self.store.settings.sync_delay_s / 4
        failing = False
        while not self._stop.wait(period):
            try:
                self.catch_up()
            except Exception as exc:  # the next look retries; the router keeps serving
                if not failing:
                    log.warning("could not read other processes' records (retrying every "
                                "%.2f s): %s", period, exc)
                failing = True
            else:
                if failing:
                    log.info("reading other processes' records again")
                failing = False

    def stop(self) -> None:
        """Stop following (idempotent); waits for a look in progress."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, then restored as it was: a rebuild makes
    hundreds of thousands of objects that all live on, and each collection its
    allocations trigger walks them all again (a quarter of opening 10,000 profiles)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _within(frontier: Frontier, counters: dict[str, int], rows: int) -> int | None:
    """The rows of a table within ``frontier``: the ``rows`` it holds less those its
    writers' ``counters`` number beyond it (None: the frontier is not of this log)."""
    beyond = frontier.unfolded(counters)
    return None if beyond is None else rows - beyond


def _difference(cached: dict[str, int], found: dict[str, int | None]) -> str:
    """What a cache claims and the log disagrees with, in a few words."""
    table = next(t for t in cached if cached[t] != found.get(t))
    if found.get(table) is None:
        return f"it folded {table} rows no writer numbered"
    return f"{cached[table]} {table} rows cached, {found[table]} in the log"

"""A router's learned state as a projection of the store's log, kept up to date.

Everything a router knows (the profile book, the strategy, the trust counts) is folded
from log rows: its own writes as soon as they commit, other processes' rows as it
catches up, and the whole log when it opens or ``refresh()``es. Each row is folded once:
the projection remembers the ids it folded recently, and every row stamped more than
``sync_lookback_s`` before the newest one it has seen counts as folded.

Against a server a daemon thread catches up every ``sync_delay_s / 4``, so a router sees
what other processes recorded within ``sync_delay_s`` without anyone calling
``refresh()``. Embedded stores have one writing process (the path lock), so nothing is
polled there.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import Store
from trustroute.profiles.store.executions import LogKey, LogRow
from trustroute.profiles.store.projections import ProjectionRepository
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router import checkpoint
from trustroute.router.learner import Learner, StrategyLearner

if TYPE_CHECKING:
    from trustroute.router.trust.layer import TrustLayer

log = logging.getLogger(__name__)
CACHE_AFTER = 10_000  # an open that read this many rows writes the projection at once


def same_execution(a: ExecutionRecord, b: ExecutionRecord) -> bool:
    """True when two records under one id say the same thing (a resent write)."""
    return (a.agent_id, a.task_type, a.success, a.effective_quality, a.timestamp) == (
        b.agent_id, b.task_type, b.success, b.effective_quality, b.timestamp)


class LogProjection:
    """The book and the learners, folded from the log; follows other processes."""

    def __init__(self, store: Store, book: ProfileBook, strategy: StrategyLearner,
                 trust: TrustLayer, lock: threading.RLock) -> None:
        self.store = store
        self.book = book
        self.strategy = strategy
        self.trust = trust
        #: Folded in this order after every placement, rebuilt in this order.
        self.learners: list[Learner] = [strategy, trust]
        # How far back rows are re-read: sync_lookback_s against a server; none embedded,
        # where this process is the only writer and folds each write itself.
        self.lookback = store.settings.sync_lookback_s if store.location.is_remote else 0.0
        self._lock = lock  # the router's: select() reads what this changes
        self._writing = threading.RLock()  # a write and its fold exclude a rebuild
        self._recent: OrderedDict[str, float] = OrderedDict()  # folded id -> stored_at
        self._newest = float("-inf")  # the newest stored_at folded (POSIX seconds)
        self._total = 0  # rows folded
        self._since_cached = 0  # rows folded since the cached projection was read/written
        self._cache = store.repository(ProjectionRepository)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- folding ---------------------------------------------------------------------
    def folded(self, key: LogKey) -> bool:
        """True when this router has folded the row at ``key`` already (rows written
        before the log design, stamped ``-inf``, were folded when the log was read)."""
        return key.record_id in self._recent or key.stored_at <= self._newest - self.lookback

    def append(self, records: Sequence[ExecutionRecord]) -> list[LogRow]:
        """Write this router's records to the log (one write) and fold them; returns the
        rows folded. A record whose id is stored already is folded only when an earlier
        try of the same record stored it without this router folding it (its answer was
        lost); otherwise it is left out (a duplicate)."""
        with self._writing:
            keys = self.store.executions.record_many(records)
            rows = {r.record_id: LogRow(r, k) for r, k in zip(records, keys, strict=True)
                    if k is not None}
            if again := [r for r in records if r.record_id not in rows]:
                stored = self.store.executions.stored(list({r.record_id for r in again}))
                for r in again:
                    row = stored.pop(r.record_id, None)
                    if row is not None and not self.folded(row.key) and \
                            same_execution(row.record, r):
                        rows[r.record_id] = row
            self.trust.expect(list(rows))  # its changes enter this router's history
            self.fold(list(rows.values()))
        if self._since_cached >= self.store.settings.projection_every:
            self.save()
        return list(rows.values())

    def fold(self, rows: Sequence[LogRow]) -> int:
        """Fold the rows not folded yet, in log order; returns how many were new."""
        with self._writing, self._lock:
            fresh = sorted((r for r in rows if not self.folded(r.key)), key=lambda r: r.key)
            if not fresh:
                return 0
            self._remember(fresh)
            placed, in_order = self.book.place(fresh)
            for learner in self.learners:
                learner.fold(placed)
            if not in_order:  # incremental evidence assumes log order: derive it again
                self.strategy.rebuild(self.book, placed, self.store)
        return len(fresh)

    def _remember(self, rows: Sequence[LogRow]) -> None:
        """Count ``rows`` (in log order) as folded: their ids while within the look-back
        of the newest stamp, and that stamp."""
        for row in rows:
            self._recent[row.record.record_id] = row.key.stored_at
            self._newest = max(self._newest, row.key.stored_at)
        self._total += len(rows)
        self._since_cached += len(rows)
        horizon = self._newest - self.lookback
        while self._recent and next(iter(self._recent.values())) <= horizon:
            self._recent.popitem(last=False)

    def rebuild(self, *, cached: bool = False) -> None:
        """Rebuild the book and every learner from the log. ``cached``: start from the
        store's cached projection when it verifies against the log, then fold the rows
        stored after it; otherwise (or when it does not verify) read the whole log."""
        with self._writing:  # no write of this router's may slip between read and swap
            if not (cached and self._restore()):
                rows = self.store.executions.scan()  # read without holding up select()
                with self._lock:
                    self.book.clear()
                    placed, _ = self.book.place(rows)
                    for learner in self.learners:
                        learner.rebuild(self.book, placed, self.store)
                    self._recent, self._newest = OrderedDict(), float("-inf")
                    self._total = self._since_cached = 0
                    self._remember(rows)
        if cached and self._since_cached >= CACHE_AFTER:
            self.save()  # the next router to open reads the projection, not the log

    def _restore(self) -> bool:
        """Start from the cached projection if it verifies; True when it did."""
        found = self._cache.read()
        if found is None:
            return False
        head, chunks = found
        if self._cache.counts(head["settled"]) != (head["executions"], head["people"]):
            log.info("the cached projection does not match the log: reading the whole log")
            return False
        cp = checkpoint.load(head["meta"], chunks, self.book.window_size)  # verified: decode
        if cp is None:
            log.info("the cached projection has another window size: reading the whole log")
            return False
        with self._lock:
            self.book.restore(cp.states, cp.clocks, cp.tails)
            self._newest = cp.settled + self.lookback  # what it had folded when written
            self.trust.restore(cp.trust, head["people"], cp.people, self._newest)
            self._recent = OrderedDict(cp.recent)
            self._total = head["executions"] + len(cp.recent)
            self._since_cached = len(cp.recent)  # rows not settled yet: write it again
            self.strategy.rebuild(self.book, [], self.store)
        self.catch_up(rebuild=False)  # rows stored after it was written
        return not self.book.stale

    def save(self) -> None:
        """Write what this router folded as the store's cached projection (when it
        folded anything since it read or wrote one, or that one had rows not settled).

        It is valid up to the database's clock minus the look-back: every row stamped
        before that is visible, and this router folded it (against a server it looks
        once more first; if another process's row still slipped by, the next open's
        counts check finds it)."""
        if not self._since_cached:
            return
        try:
            if self.store.location.is_remote:
                self.catch_up(rebuild=False)
            now = self.store.now().timestamp()
            with self._writing, self._lock:
                settled = max(0.0, now - self.lookback)
                recent = {i: t for i, t in self._recent.items() if t > settled}
                people_settled, people = self.trust.settled_people(settled)
                meta, chunks = checkpoint.dump(checkpoint.Checkpoint(
                    settled, *self.book.export(), self.trust.book.all_counts(), recent, people,
                    self.book.window_size))
                self._cache.write(chunks, meta, datetime.fromtimestamp(settled, UTC),
                                  self._total - len(recent), people_settled)
                self._since_cached = 0
        except Exception as exc:  # a cache: the next open reads the log instead
            log.warning("could not write the cached projection: %s", exc)

    def catch_up(self, *, rebuild: bool = True) -> int:
        """Fold what other processes stored since the last look; returns how many
        execution rows were new. Rebuilds when a row arrived too late to be placed
        (or a pair was retired)."""
        since = datetime.fromtimestamp(max(0.0, self._newest - self.lookback), UTC)
        total = 0
        reader = self.store.reader()  # its own connection: record() never waits behind it
        for keys in reader.executions.since(since):  # stamp order
            missing = [k.record_id for k in keys if not self.folded(k)]
            if missing:  # one page at a time: catching up far stays in bounded memory
                total += self.fold(list(reader.executions.stored(missing).values()))
        retired = self.trust.catch_up(self.lookback, reader.repository(TrustRepository))
        if rebuild and (retired or self.book.stale):
            log.info("rebuilding from the log: %s", "a pair was retired" if retired else
                     "a row arrived older than the seqs the book remembers")
            self.rebuild()
        return total

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

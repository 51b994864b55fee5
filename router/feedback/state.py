"""What feedback has said about each execution, and what that makes its quality (pure).

Every router folds the same rows (executions and feedback) into a ``FeedbackState``, in
whatever order they reach it, and ends with the same qualities:

- a verdict is kept per (execution, key); of two verdicts on one key the later one
  stands, by its time and then its id (never by the order they were folded in);
- the quality of an execution with verdicts is the policy's weighted mean of its keys;
  without verdicts it is the quality the record carried, 0.0 for a failure, 1.0 for a
  success when ``wait_s`` is 0; otherwise the run is *pending* until ``wait_s`` after its
  timestamp, and then the policy's ``default`` settles it;
- a verdict on a decision whose execution this router has not folded yet is kept and
  joins the execution when it arrives (feedback can beat its execution across processes);
- the human counts a verdict adds (one approval, value >= 0.5, or one rejection per
  (execution, key)) are replaced, not added, when a later verdict on the same key comes.

Changes come back as ``Change``s (old and new quality of a run) and ``Human`` deltas; the
projection applies them to the profile book, the strategy and the trust counts.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trustroute.router.feedback.policy import FeedbackPolicy

APPROVAL = 0.5  # a verdict at or above this value counts as an approval


@dataclass(slots=True)
class Run:
    """An execution as feedback sees it (its evidence quality may change)."""

    record_id: str
    agent_id: str
    task_type: str
    timestamp: float  # POSIX seconds, the record's own
    success: bool
    given: float | None  # the quality the record carried; None: none given
    seq: int
    key: Any  # its place in the log
    quality: float | None = None  # its quality evidence now; None: pending or ignored
    pending: bool = False
    decision_id: str | None = None  # the decision it carried out, if any


@dataclass(frozen=True, slots=True)
class Verdict:
    """One key's verdict on an execution (or on a decision not recorded yet)."""

    id: str
    key: str
    value: float  # in [0, 1]
    at: float  # POSIX seconds, when it was given

    def after(self, other: Verdict) -> bool:
        """True when this verdict was given after ``other`` (the id breaks ties)."""
        return (self.at, self.id) > (other.at, other.id)


@dataclass(frozen=True, slots=True)
class Change:
    """A run's quality evidence moved from ``old`` to ``new`` (None: no evidence)."""

    run: Run
    old: float | None
    new: float | None
    was_pending: bool


@dataclass(frozen=True, slots=True)
class Human:
    """Approvals and rejections a verdict adds to (or takes from) a pair."""

    agent_id: str
    task_type: str
    approvals: int
    rejections: int


def _decision(decision_id: str) -> str:
    return f"decision:{decision_id}"


class FeedbackState:
    """Verdicts per execution, the runs they apply to, the runs still pending."""

    def __init__(self, policy: FeedbackPolicy, memory: int | None = None) -> None:
        self.policy = policy
        #: Settled runs remembered for amending (the newest; default ``policy.remember``).
        self.memory = policy.remember if memory is None else memory
        self._all = False  # remember every run (while a rebuild folds the whole log)
        self.clear()

    def clear(self) -> None:
        """Forget everything (before a rebuild)."""
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._by_decision: dict[str, str] = {}
        self._verdicts: dict[str, dict[str, Verdict]] = {}  # target -> key -> verdict
        self._pairs: dict[str, tuple[str, str]] = {}  # target -> pair its verdicts count for
        self._due: list[tuple[float, str]] = []  # (deadline, record id) of pending runs
        self._human: list[Human] = []  # from runs joining their decision's verdicts
        #: Record ids of verdicts whose run is not remembered: not folded yet, or folded
        #: longer ago than ``memory`` runs (then only a rebuild can amend it).
        self.missed: list[str] = []

    # -- reading -------------------------------------------------------------------
    def quality_of(self, record_id: str) -> tuple[bool, float | None]:
        """(known, quality evidence) of a run; (False, None) when not remembered."""
        run = self._runs.get(record_id)
        return (False, None) if run is None else (True, run.quality)

    def run(self, ref: str) -> Run | None:
        """A remembered run, by its record id or its decision's id."""
        return self._runs.get(ref) or self._runs.get(self._by_decision.get(ref, ""))

    def next_due(self) -> float:
        """The earliest moment a pending run is settled by default (inf: none)."""
        return self._due[0][0] if self._due else float("inf")

    def take_human(self) -> list[Human]:
        """Human deltas produced while placing runs (their decision's verdicts joined)."""
        out, self._human = self._human, []
        return out

    # -- the cached projection ------------------------------------------------------------
    @property
    def carried(self) -> bool:
        """Whether a cached projection must carry this state to be exact: runs can await
        a verdict (``wait_s > 0``) or verdicts were folded."""
        return self.policy.wait_s > 0 or bool(self._verdicts)

    def export(self) -> dict[str, Any]:
        """JSON-ready form: the policy, the remembered runs (oldest first), their
        decisions, every verdict and the pair each target's verdicts count for."""
        return {
            "policy": self.policy.model_dump(mode="json"),
            "runs": [[r.record_id, r.agent_id, r.task_type, r.timestamp, r.success, r.given,
                      r.seq, None if r.key is None else list(r.key), r.quality, r.pending]
                     for r in self._runs.values()],
            "decisions": [[r.decision_id, r.record_id] for r in self._runs.values()
                          if r.decision_id is not None],
            "verdicts": [[target, v.id, v.key, v.value, v.at]
                         for target, verdicts in self._verdicts.items()
                         for v in verdicts.values()],
            "pairs": [[target, *pair] for target, pair in self._pairs.items()]}

    def same_policy(self, data: Mapping[str, Any]) -> bool:
        """Whether ``export()`` ``data`` was folded under this state's policy."""
        return FeedbackPolicy.model_validate(data["policy"]) == self.policy

    def load(self, data: Mapping[str, Any]) -> None:
        """Take the place of everything held: ``export()`` data (of the same policy)."""
        self.clear()
        wait = self.policy.wait_s
        for record_id, agent, task, stamp, ok, given, seq, key, quality, pending in data["runs"]:
            run = Run(str(record_id), str(agent), str(task), float(stamp), bool(ok),
                      None if given is None else float(given), int(seq),
                      None if key is None else tuple(key),
                      None if quality is None else float(quality), bool(pending))
            self._runs[run.record_id] = run
            if run.pending:
                heapq.heappush(self._due, (run.timestamp + wait, run.record_id))
        for decision_id, record_id in data["decisions"]:
            self._by_decision[str(decision_id)] = str(record_id)
            self._runs[str(record_id)].decision_id = str(decision_id)
        for target, vid, name, value, at in data["verdicts"]:
            self._verdicts.setdefault(str(target), {})[str(name)] = Verdict(
                str(vid), str(name), float(value), float(at))
        self._pairs = {str(t): (str(a), str(k)) for t, a, k in data["pairs"]}

    # -- executions ------------------------------------------------------------------
    def place(self, run: Run, now: float) -> tuple[float | None, bool]:
        """Remember a newly placed run; returns its quality evidence and whether it is
        pending. Verdicts given on its decision before it arrived join it now."""
        self._runs[run.record_id] = run
        self._evict()
        verdicts = self._verdicts.get(run.record_id)
        if verdicts:
            self._pairs[run.record_id] = (run.agent_id, run.task_type)
        run.quality, run.pending = self._resolve(run, verdicts, now)
        if run.pending:
            heapq.heappush(self._due, (run.timestamp + self.policy.wait_s, run.record_id))
        return run.quality, run.pending

    def join_decision(self, run: Run, decision_id: str | None, now: float) -> None:
        """Attach verdicts given on ``decision_id`` before its run arrived (call right
        after ``place``); human counts of verdicts the join replaces are queued."""
        if decision_id is None:
            return
        # a decision recorded twice: its verdicts are the first run's, as in a rebuild
        # and in the store (``ExecutionRepository.find``), whatever order they came in
        self._by_decision.setdefault(decision_id, run.record_id)
        run.decision_id = decision_id
        early = self._verdicts.pop(_decision(decision_id), None)
        pair = self._pairs.pop(_decision(decision_id), None)
        if not early:
            return
        mine = self._verdicts.setdefault(run.record_id, {})
        old_pair = self._pairs.get(run.record_id)
        self._pairs[run.record_id] = (run.agent_id, run.task_type)
        for name, verdict in early.items():
            current = mine.get(name)
            if current is None:
                mine[name] = verdict
                continue
            loser = verdict if current.after(verdict) else current
            if verdict.after(current):
                mine[name] = verdict
            where = (old_pair if loser is current else pair) or (run.agent_id, run.task_type)
            self._human.extend(self._count(where, name, loser, -1))
        run.quality, run.pending = self._resolve(run, mine, now)

    def remember_all(self, on: bool) -> None:
        """Remember every run placed from now on (a rebuild holds the whole log in memory
        anyway, so every verdict finds its run); turned off, forget down to ``memory``."""
        self._all = on
        if on:
            return
        excess = len(self._runs) - self.memory
        for record_id in [r.record_id for r in self._runs.values() if not r.pending]:
            if excess <= 0:
                break
            self._forget(record_id)
            excess -= 1

    def take_missed(self) -> list[str]:
        """Record ids of verdicts folded since the last call whose run was not known."""
        out, self.missed = self.missed, []
        return out

    def _evict(self) -> None:
        """Forget the oldest settled runs past ``memory`` (a pending run is kept: its
        deadline settles it; a few are stepped over per call, so this stays cheap)."""
        for _ in range(0 if self._all else 8):
            if len(self._runs) <= self.memory:
                return
            record_id, oldest = next(iter(self._runs.items()))
            if oldest.pending:
                self._runs.move_to_end(record_id)
            else:
                self._forget(record_id)

    def _forget(self, record_id: str) -> None:
        """Forget one run, and its decision's way to it."""
        run = self._runs.pop(record_id)
        if run.decision_id is not None and \
                self._by_decision.get(run.decision_id) == record_id:
            del self._by_decision[run.decision_id]

    def _resolve(self, run: Run, verdicts: Mapping[str, Verdict] | None, now: float
                 ) -> tuple[float | None, bool]:
        """(quality evidence, pending) of a run given its verdicts at ``now``."""
        if verdicts:
            return self.policy.combine({k: v.value for k, v in verdicts.items()}), False
        if run.given is not None:
            return run.given, False
        if not run.success:
            return 0.0, False
        if self.policy.wait_s <= 0:
            return 1.0, False
        if now < run.timestamp + self.policy.wait_s:
            return None, True
        return self.policy.fallback(run.success), False

    def settle_due(self, now: float) -> list[Change]:
        """Settle by default every pending run whose wait is over at ``now``."""
        changes: list[Change] = []
        while self._due and self._due[0][0] <= now:
            _, record_id = heapq.heappop(self._due)
            run = self._runs.get(record_id)
            if run is None or not run.pending:
                continue  # settled by feedback meanwhile
            old = run.quality
            run.quality, run.pending = self._resolve(run, None, now)
            changes.append(Change(run, old, run.quality, True))
        return changes

    # -- verdicts --------------------------------------------------------------------
    def verdict(self, row: Mapping[str, Any], now: float) -> tuple[list[Change], list[Human]]:
        """Fold one feedback row (``record_id`` or ``decision_id``, ``key``, ``score`` or
        ``approved``, ``at``, ``id``, ``agent_id``, ``task_type``); returns the quality
        change of its run (if folded and changed) and the human count deltas."""
        name = row.get("key") or "user"
        if row.get("score") is not None:
            value = self.policy.normalise(name, float(row["score"]))
        else:
            value = 1.0 if row.get("approved") else 0.0
        at = row["at"].timestamp() if hasattr(row["at"], "timestamp") else float(row["at"])
        new = Verdict(str(row["id"]), name, value, at)
        target = row.get("record_id") or self._by_decision.get(row.get("decision_id") or "")
        if target is None:
            target = _decision(str(row["decision_id"]))
        pair = (row["agent_id"], row["task_type"])
        verdicts = self._verdicts.setdefault(target, {})
        self._pairs.setdefault(target, pair)
        current = verdicts.get(name)
        if current is not None and not new.after(current):
            return [], []  # an older verdict (or this one again): the later one stands
        verdicts[name] = new
        human = self._count(pair, name, new, 1)
        if current is not None:
            human += self._count(pair, name, current, -1)
        run = self._runs.get(target)
        if run is None:
            if row.get("record_id"):
                self.missed.append(target)
            return [], human
        old, was_pending = run.quality, run.pending
        run.quality, run.pending = self._resolve(run, verdicts, now)
        if (old, was_pending) == (run.quality, run.pending):
            return [], human
        return [Change(run, old, run.quality, was_pending)], human

    def _count(self, pair: tuple[str, str], name: str, verdict: Verdict, sign: int
               ) -> list[Human]:
        if not self.policy.human(name):
            return []
        approved = verdict.value >= APPROVAL
        return [Human(*pair, sign * int(approved), sign * int(not approved))]

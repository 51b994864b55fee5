"""The router's side of the decision log: buffer decisions, join outcomes, calibrate.

``select()`` must never wait on the database, so a decision is only appended to an
in-memory buffer here; the buffer is written in batches from ``record()`` (or
``flush()``/``close()``). When an outcome is recorded for a decision this router made,
the calibration map learns from (predicted, realised) at once, so the next decision is
already calibrated with it; the outcome is written into the decision's row.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.router.decision import CandidateScore, RoutingDecision
from trustroute.router.trust.calibration import CalibrationMap, CalibrationSettings

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Known:
    """What this router remembers of a recent decision."""

    raw: float  # the prediction before calibration
    agent_id: str
    task_type: str
    joined: bool = False  # its outcome already taught the calibration map


def candidate_row(c: CandidateScore, *, chosen: bool) -> dict[str, Any]:
    """The logged form of one candidate: the numbers of the ranking for every candidate,
    and the full explanation (reason, components) for the chosen one only.

    With many agents, explaining every candidate in every logged decision dominated the
    cost of routing (53 agents: ~12 ms of serialisation and writing per decision), and
    the numbers alone are enough to audit a ranking after the fact.
    """
    row = {"agent_id": c.agent_id, "score": c.score, "final_score": c.final_score,
           "executions": c.executions, "load": c.load,
           "success_probability": c.success_probability}
    if chosen:
        row["reason"] = c.reason
        row["components"] = dict(c.components)
    return row


class DecisionLog:
    """In-memory buffer of decisions and outcomes, and the calibration map they train."""

    def __init__(self, repo: DecisionRepository, strategy: str,
                 settings: CalibrationSettings | None = None, *, enabled: bool = True,
                 memory: int = 50_000, max_pending: int = 10_000,
                 log_candidates: int | None = 8) -> None:
        self._repo = repo
        self.strategy = strategy
        self.settings = settings or CalibrationSettings()
        self.calibration = CalibrationMap(self.settings)
        self.enabled = enabled
        # how many of the ranking's best candidates a logged decision keeps: storing
        # every candidate of a 50-agent ranking costs the embedded store ~2 ms a decision
        self.log_candidates = log_candidates
        self._memory = memory
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._pending: deque[tuple[RoutingDecision, float, str | None]] = deque(
            maxlen=max_pending)
        self.dropped = 0  # decisions evicted from a full buffer (never written)
        self._outcomes: dict[str, dict[str, Any]] = {}
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._dirty = False
        self._warned = False

    # -- hot path ------------------------------------------------------------------
    def remember(self, decision: RoutingDecision, raw: float, detail: str | None) -> None:
        """Buffer one decision, its raw prediction and abstention detail (no I/O)."""
        with self._lock:
            self._known[decision.decision_id] = _Known(raw, decision.agent_id,
                                                       decision.task_type)
            if len(self._known) > self._memory:
                self._known.popitem(last=False)
            if not self.enabled:
                return
            if len(self._pending) == self._max_pending:  # nobody records or flushes: bounded
                self.dropped += 1
                if not self._warned:
                    self._warned = True
                    log.info("decision log buffer full (%d decisions): the oldest unwritten "
                             "decisions are dropped; record() or flush() persists them",
                             self._max_pending)
            self._pending.append((decision, raw, detail))

    def outcome(self, record: ExecutionRecord) -> None:
        """Join a recorded outcome with its decision; the calibration map learns it."""
        decision_id = record.decision_id
        if decision_id is None:
            return
        with self._lock:
            info = self._known.get(decision_id)
            if info is not None and not info.joined:
                info.joined = True
                self.calibration.update(info.raw, record.success)
                self._dirty = True
            if self.enabled:
                self._outcomes[decision_id] = {
                    "decision_id": decision_id, "success": record.success,
                    "quality": record.effective_quality, "record_id": record.record_id,
                    "recorded_at": record.timestamp}

    # -- lookups -------------------------------------------------------------------
    def lookup(self, decision_id: str) -> tuple[str, str] | None:
        """(agent id, task type) of a decision: from memory, else from the store."""
        with self._lock:
            info = self._known.get(decision_id)
        if info is not None:
            return info.agent_id, info.task_type
        row = self._repo.get(decision_id)
        return (row["agent_id"], row["task_type"]) if row else None

    def predicted(self, decision_id: str) -> float | None:
        """The raw (uncalibrated) prediction behind a recent decision of this router."""
        with self._lock:
            info = self._known.get(decision_id)
        return None if info is None else info.raw

    @property
    def backlog(self) -> int:
        """Buffered items not yet written."""
        return len(self._pending) + len(self._outcomes) + int(self._dirty)

    # -- persistence ---------------------------------------------------------------
    def flush(self) -> None:
        """Write buffered decisions, outcomes and the calibration sums (the caller
        serialises flushes). On failure the items are put back for the next try."""
        with self._lock:
            pending, self._pending = self._pending, deque(maxlen=self._max_pending)
            outcomes, self._outcomes = self._outcomes, {}
            dirty, self._dirty = self._dirty, False
            state = self.calibration.state() if dirty else None
        rows = []
        for decision, raw, detail in pending:
            row = self._row(decision, raw, detail)
            found = outcomes.pop(decision.decision_id, None)
            if found is not None:
                row.update({k: v for k, v in found.items() if k != "decision_id"})
            rows.append(row)
        try:
            self._repo.write(rows, list(outcomes.values()))
            if state is not None:
                self._repo.save_calibration(self.strategy, state)
        except Exception:
            with self._lock:
                pending.extend(self._pending)
                self._pending = pending
                for decision_id, found in outcomes.items():
                    self._outcomes.setdefault(decision_id, found)
                self._dirty = self._dirty or dirty
            raise

    def _row(self, d: RoutingDecision, raw: float, detail: str | None) -> dict[str, Any]:
        return {
            "decision_id": d.decision_id, "task_type": d.task_type, "agent_id": d.agent_id,
            "strategy": d.strategy, "predicted": raw, "confidence": d.confidence,
            "tier": d.tier, "abstained": d.abstained, "abstain_reason": d.abstain_reason,
            "abstain_detail": detail, "created_at": d.created_at,
            "candidates": [candidate_row(c, chosen=c.agent_id == d.agent_id)
                           for c in d.candidates[:self.log_candidates]],
            "candidate_count": len(d.candidates),
            "success": None, "quality": None, "record_id": None, "recorded_at": None,
        }

    def load(self) -> None:
        """Restore the calibration map: saved sums, else the latest logged outcomes."""
        fresh = CalibrationMap(self.settings)
        state = self._repo.load_calibration(self.strategy)
        if state is None or not fresh.load_state(state):
            horizon = self.settings.horizon
            limit = int(5 * horizon) if horizon else 10_000
            fresh.update_many(self._repo.calibration_pairs(self.strategy, limit))
        with self._lock:
            self.calibration = fresh

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
from trustroute.profiles.trust_counts import Pair
from trustroute.router.decision import CandidateScore, RoutingDecision
from trustroute.router.trust.calibration import CalibrationMap
from trustroute.router.trust.options import TrustOptions

log = logging.getLogger(__name__)

MEMORY = 50_000  # recent decisions remembered for calibration and feedback
MAX_PENDING = 10_000  # unwritten decisions kept when nobody records or flushes
NO_OUTCOME: dict[str, Any] = {"success": None, "quality": None, "record_id": None,
                              "recorded_at": None}


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

    def __init__(self, repo: DecisionRepository, strategy: str, options: TrustOptions) -> None:
        self._repo = repo
        self.strategy = strategy
        self.options = options
        self.calibration = CalibrationMap(self.options.calibration)
        self._lock = threading.Lock()
        self._pending: deque[tuple[RoutingDecision, float, str | None]] = deque(
            maxlen=MAX_PENDING)
        self.dropped = 0  # decisions evicted from a full buffer (never written)
        self._outcomes: dict[str, dict[str, Any]] = {}  # decision id -> outcome fields
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._dirty = False

    # -- hot path ------------------------------------------------------------------
    def remember(self, decision: RoutingDecision, raw: float, detail: str | None) -> None:
        """Buffer one decision, its raw prediction and abstention detail (no I/O)."""
        with self._lock:
            self._known[decision.decision_id] = _Known(raw, decision.agent_id,
                                                       decision.task_type)
            if len(self._known) > MEMORY:
                self._known.popitem(last=False)
            if not self.options.log_decisions:
                return
            if len(self._pending) == MAX_PENDING:  # nobody records or flushes: bounded
                if not self.dropped:
                    log.info("decision log buffer full (%d decisions): the oldest unwritten "
                             "decisions are dropped; record() or flush() persists them",
                             MAX_PENDING)
                self.dropped += 1
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
            if self.options.log_decisions:
                self._outcomes[decision_id] = {
                    "success": record.success, "quality": record.effective_quality,
                    "record_id": record.record_id, "recorded_at": record.timestamp}

    # -- lookups -------------------------------------------------------------------
    def lookup(self, decision_id: str) -> Pair | None:
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
            pending, self._pending = self._pending, deque(maxlen=MAX_PENDING)
            outcomes, self._outcomes = self._outcomes, {}
            dirty, self._dirty = self._dirty, False
            state = self.calibration.state() if dirty else None
        rows = {d.decision_id: self._row(d, raw, detail,
                                         outcomes.get(d.decision_id, NO_OUTCOME))
                for d, raw, detail in pending}
        try:  # outcomes of rows written earlier are merged into them
            self._repo.write(rows, {k: v for k, v in outcomes.items() if k not in rows})
            if state is not None:
                self._repo.save_calibration(self.strategy, state)
        except Exception:
            with self._lock:
                pending.extend(self._pending)
                self._pending = pending
                self._outcomes = {**outcomes, **self._outcomes}
                self._dirty = self._dirty or dirty
            raise

    def _row(self, d: RoutingDecision, raw: float, detail: str | None,
             outcome: dict[str, Any]) -> dict[str, Any]:
        return {
            "task_type": d.task_type, "agent_id": d.agent_id,
            "strategy": d.strategy, "predicted": raw, "confidence": d.confidence,
            "tier": d.tier, "abstained": d.abstained, "abstain_reason": d.abstain_reason,
            "abstain_detail": detail, "created_at": d.created_at,
            "candidates": [candidate_row(c, chosen=c.agent_id == d.agent_id)
                           for c in d.candidates[:self.options.log_candidates]],
            "candidate_count": len(d.candidates), **outcome,
        }

    def load(self) -> None:
        """Restore the calibration map: saved sums, else the latest logged outcomes."""
        settings = self.options.calibration
        fresh = CalibrationMap(settings)
        state = self._repo.load_calibration(self.strategy)
        if state is None or not fresh.load_state(state):
            limit = int(5 * settings.horizon) if settings.horizon else 10_000
            for predicted, success in self._repo.calibration_pairs(self.strategy, limit):
                fresh.update(predicted, success)
        with self._lock:
            self.calibration = fresh

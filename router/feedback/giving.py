"""``router.feedback(ref, ...)``: check a verdict, find what it is about, append it.

Everything is checked before anything is stored: exactly one of ``approved`` (a bool)
and ``score`` (a finite number within the key's scale, [0, 1] by default); a ``ref`` that
names nothing raises ``UnknownDecision``. The row is appended to ``trust_feedback``
under the client's ``feedback_id`` (a new one when None), so a verdict sent twice is
stored and counted once; every router folds it (docs/feedback.md).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trustroute.profiles.records import check_identifier, check_text, utc_now
from trustroute.profiles.store.executions import ExecutionRepository
from trustroute.router.errors import UnknownDecision
from trustroute.router.feedback.policy import FeedbackPolicy
from trustroute.router.feedback.state import FeedbackState
from trustroute.router.trust.decision_log import DecisionLog


@dataclass(frozen=True, slots=True)
class Target:
    """What a ref names: a pair, and the execution (None while only its decision is
    known) and decision behind it."""

    agent_id: str
    task_type: str
    record_id: str | None
    decision_id: str | None


def check_verdict(policy: FeedbackPolicy, approved: bool | None, score: float | None,
                  key: str, comment: str | None, feedback_id: str | None) -> None:
    """Raise ValueError/TypeError (one line, naming the argument) for a bad verdict."""
    check_identifier(key, "key")
    if feedback_id is not None:
        check_identifier(feedback_id, "feedback_id")
    if (approved is None) == (score is None):
        raise ValueError("feedback takes exactly one of approved (a bool) and score "
                         f"(a number), got {'both' if approved is not None else 'neither'}")
    if approved is not None and not isinstance(approved, bool):
        raise TypeError(f"approved must be True or False, got {type(approved).__name__}")
    if score is not None:
        policy.normalise(key, score)  # a finite number within the key's scale
    if comment is not None:
        check_text(comment, "comment")


def resolve(ref: str, state: FeedbackState, executions: ExecutionRepository,
            decisions: DecisionLog) -> Target:
    """The execution or decision ``ref`` names: a record id, a decision id or a
    LangChain run id; UnknownDecision when none."""
    check_identifier(ref, "ref")
    run = state.run(ref)
    if run is not None:
        return Target(run.agent_id, run.task_type, run.record_id, None)
    row = executions.find(ref)
    if row is not None:
        rec = row.record
        return Target(rec.agent_id, rec.task_type, rec.record_id, rec.decision_id)
    pair = decisions.lookup(ref)
    if pair is None:
        raise UnknownDecision(ref)
    return Target(*pair, None, ref)


def verdict_row(target: Target, ref: str, approved: bool | None, score: float | None,
                key: str, comment: str | None, at: datetime | None = None
                ) -> dict[str, Any]:
    """The ``trust_feedback`` row of one verdict given ``at`` (default: now)."""
    return {"agent_id": target.agent_id, "task_type": target.task_type, "kind": "feedback",
            "at": at or utc_now(), "approved": approved,
            "score": None if score is None else float(score), "key": key, "ref": ref,
            "record_id": target.record_id, "decision_id": target.decision_id,
            "comment": comment, "signal": None}


def new_feedback_id() -> str:
    """A client id for a verdict."""
    return str(uuid.uuid4())

"""The confidence history (table ``trust_history``): one row per change of a pair's
scores, with the reasons counted since the row before (docs/trust.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trustroute.router.trust.scores import TrustScores


@dataclass(slots=True)
class History:
    """Reasons for a pair's next confidence-history row (this router's own changes,
    counted from the first change that moved the scores) and the last one's time."""

    reasons: Counter[str]
    at: datetime


def history_row(agent_id: str, task_type: str, scores: TrustScores, reason: str,
                at: datetime) -> dict[str, Any]:
    """One confidence-history entry (table ``trust_history``)."""
    return {"agent_id": agent_id, "task_type": task_type, **scores.as_dict(),
            "reason": reason, "at": at}


def describe(reasons: Counter[str]) -> str:
    """The reasons of one row: ``execution positive x12, feedback approved``."""
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(reasons.items()))

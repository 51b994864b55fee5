"""What a routing decision says: who was chosen, how every candidate scored, and why.

``as_dict`` gives the JSON form.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trustroute.router.load import Lease


def new_decision_id() -> str:
    """A random (version 4) UUID string."""
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class CandidateScore:
    """One candidate's score components, best explained by ``reason``.

    ``score`` is the strategy's; ``final_score`` is after load balancing;
    ``success_probability`` is the strategy's estimate that the agent succeeds (None
    when it has none), which the trust layer calibrates into the decision's confidence.
    """

    agent_id: str
    expertise: float
    confidence: float
    adjusted_score: float
    executions: int
    load: float
    score: float
    final_score: float
    reason: str
    components: Mapping[str, float] = field(default_factory=dict)
    success_probability: float | None = None


@dataclass(frozen=True, slots=True)
class RoutingDecision:
    """The outcome of ``AgentRouter.select``: pass it back to ``record``.

    ``confidence`` is the predicted probability that the chosen agent succeeds;
    ``tier``, ``abstained`` and ``abstain_reason`` describe how sure the router is.
    """

    decision_id: str
    task_type: str
    agent_id: str
    candidates: tuple[CandidateScore, ...]
    strategy: str
    created_at: datetime
    confidence: float | None = None
    tier: str | None = None
    abstained: bool = False
    abstain_reason: str | None = None
    context: Mapping[str, Any] | None = None
    lease: Lease | None = field(default=None, repr=False, compare=False)

    @property
    def chosen(self) -> CandidateScore:
        """The chosen candidate's scores."""
        return next(c for c in self.candidates if c.agent_id == self.agent_id)

    @property
    def score(self) -> float:
        """The chosen candidate's final score."""
        return self.chosen.final_score

    @property
    def ranking(self) -> list[str]:
        """Candidate ids, best first."""
        return [c.agent_id for c in self.candidates]

    def release(self) -> None:
        """Release the in-flight slot taken with ``select(..., acquire=True)``."""
        if self.lease is not None:
            self.lease.release()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (datetimes as ISO strings)."""
        return {
            "decision_id": self.decision_id,
            "task_type": self.task_type,
            "agent_id": self.agent_id,
            "strategy": self.strategy,
            "created_at": self.created_at.isoformat(),
            "confidence": self.confidence,
            "tier": self.tier,
            "abstained": self.abstained,
            "abstain_reason": self.abstain_reason,
            "candidates": [
                {**asdict(c), "components": dict(c.components)} for c in self.candidates
            ],
        }

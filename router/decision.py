"""What a routing decision says: who was chosen, how every candidate scored, and why.

Plain slotted dataclasses rather than pydantic models: ``select()`` builds one per
candidate on the hot path. ``CandidateScore`` is deliberately not ``frozen``: a frozen
dataclass sets every field through ``object.__setattr__``, which makes construction
about four times slower; treat it as read-only. Its ``reason`` and ``components`` may be
built on first read (``trustroute.router.explanation``): same values, paid only when looked at.
``as_dict`` gives the JSON form.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from trustroute.router.explanation import Deferred, explained_on_read

if TYPE_CHECKING:
    from trustroute.router.load import Lease


def new_decision_id() -> str:
    """A random (version 4) UUID string, as ``str(uuid.uuid4())`` gives, at a third of
    its cost (it is made on every decision)."""
    h = "%032x" % (int.from_bytes(os.urandom(16)) & _UUID4_CLEAR | _UUID4_SET)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))  # version nibble and variant bits
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)  # version 4, RFC 4122 variant


@explained_on_read
@dataclass(slots=True)
class CandidateScore:
    """One candidate's score components, best explained by ``reason`` (read-only)."""

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

    @classmethod
    def deferred(cls, agent_id: str, expertise: float, confidence: float,
                 adjusted_score: float, executions: int, load: float, score: float,
                 final_score: float, explainer: Deferred, key: Any) -> CandidateScore:
        """A candidate whose reason and components ``explainer.explain(key)`` builds when
        first read."""
        return cls(agent_id, expertise, confidence, adjusted_score, executions, load, score,
                   final_score, explainer, key)  # type: ignore[arg-type]


@dataclass(slots=True)
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

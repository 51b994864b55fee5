"""What a routing decision says: who was chosen, how every candidate scored, and why.

``as_dict`` gives the JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from os import urandom
from typing import TYPE_CHECKING, Any

from trustroute.profiles.records import iso_z

if TYPE_CHECKING:
    from trustroute.profiles.profile import TaskTypeProfile
    from trustroute.router.load import Lease
    from trustroute.router.strategies.base import ArmScore


def new_decision_id() -> str:
    """A random (version 4) UUID string from the OS's randomness.

    A decision id is a reference that feedback can be given against (``feedback(ref)``,
    a thumbs endpoint), so it must not be guessable from other ids a client has seen:
    a seeded pseudo-random generator (Mersenne Twister) can be predicted from a few
    hundred outputs, which would let anyone who sees their own decision ids give verdicts
    on other people's decisions. This is ``str(uuid.uuid4())`` written out: the same 16
    bytes of ``os.urandom`` with the version (4) and variant (10) bits set, without the
    ``UUID`` object, which costs about 4 us of a ``select()`` right after a ``record()``.
    """
    h = urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


@dataclass(slots=True)
class CandidateScore:
    """One candidate: what is known of it, its scores, and why.

    ``profile`` is the pair's learning profile when the decision was made; ``score`` is
    the strategy's, ``final_score`` the same after load balancing. ``verdict`` is what
    the strategy said (its reason, components and success probability); ``note`` is what
    the trust policy adds (why a candidate was moved last). Treat it as read-only.
    """

    agent_id: str
    profile: TaskTypeProfile
    load: float
    score: float
    final_score: float
    verdict: ArmScore | None = field(default=None, repr=False, compare=False)
    note: str | None = None

    @property
    def expertise(self) -> float:
        """The pair's recency-weighted mean quality."""
        return self.profile.expertise

    @property
    def confidence(self) -> float:
        """``min(1, executions / ramp)``."""
        return self.profile.confidence

    @property
    def adjusted_score(self) -> float:
        """``expertise x confidence``."""
        return self.profile.adjusted_score

    @property
    def executions(self) -> int:
        """Executions recorded for the pair."""
        return self.profile.executions_total

    @property
    def success_probability(self) -> float | None:
        """The strategy's estimate that this agent succeeds (None when it has none),
        which the trust layer calibrates into the decision's confidence."""
        return self.verdict.success_probability if self.verdict is not None else None

    @property
    def reason(self) -> str:
        """One line: the trust policy's note, the strategy's reason, and the load."""
        parts = [self.note] if self.note else []
        if self.verdict is not None:
            parts.append(self.verdict.reason)
        if self.load:
            parts.append(f"load {self.load:.2f}")
        return "; ".join(parts)

    @property
    def components(self) -> Mapping[str, float]:
        """The numbers behind the strategy's score."""
        return self.verdict.components if self.verdict is not None else {}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"agent_id": self.agent_id, "expertise": self.expertise,
                "confidence": self.confidence, "adjusted_score": self.adjusted_score,
                "executions": self.executions, "load": self.load, "score": self.score,
                "final_score": self.final_score,
                "success_probability": self.success_probability, "reason": self.reason,
                "components": dict(self.components)}


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
        """JSON-ready form (datetimes as ISO 8601 strings in UTC with ``Z``)."""
        return {
            "decision_id": self.decision_id,
            "task_type": self.task_type,
            "agent_id": self.agent_id,
            "strategy": self.strategy,
            "created_at": iso_z(self.created_at),
            "confidence": self.confidence,
            "tier": self.tier,
            "abstained": self.abstained,
            "abstain_reason": self.abstain_reason,
            "candidates": [c.as_dict() for c in self.candidates],
        }

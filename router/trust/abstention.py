"""Abstention: a router that says "I don't know" instead of guessing.

Gates are small settings models that can be called, each answering one question about a
ranked decision and returning a one-line explanation when it fires. ``AbstentionPolicy``
(config section ``abstention``) evaluates the enabled gates in order; the first that
fires is the decision's ``abstain_reason``. The gates, their defaults and the reasons
for them are in docs/trust.md ("Abstention").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, Literal

from pydantic import Field

from trustroute.router.decision import CandidateScore, RoutingDecision
from trustroute.router.errors import RouterError
from trustroute.router.trust.settings import Settings

OnAbstain = Literal["route_anyway", "human", "raise"]


@dataclass(frozen=True, slots=True)
class GateView:
    """What a gate may look at: the ranked candidates (best first, each with the
    strategy's raw success estimate) and the calibration map."""

    task_type: str
    candidates: Sequence[CandidateScore]
    calibrate: Callable[[float], float]
    confidence: float = 0.0  # the chosen candidate's calibrated success probability


class Gate(Settings):
    """One abstention condition: ``enabled`` says whether the policy evaluates it."""

    name: ClassVar[str]
    enabled: bool = False

    def __call__(self, view: GateView) -> str | None:
        """A one-line explanation when the gate fires, else None."""
        raise NotImplementedError


class WeakResonance(Gate):
    """Fires when no candidate's calibrated success probability reaches ``floor``."""

    name: ClassVar[str] = "weak_resonance"
    enabled: bool = True
    floor: float = Field(default=0.5, ge=0, le=1)

    def __call__(self, view: GateView) -> str | None:
        """Best calibrated estimate below the floor (unknown estimates never fire)."""
        if view.confidence >= self.floor:  # the chosen one reaches it: nothing to check
            return None
        known = [c.success_probability for c in view.candidates
                 if c.success_probability is not None]
        if not known:
            return None
        best = view.calibrate(min(1.0, max(0.0, max(known))))
        if best >= self.floor:
            return None
        return (f"best candidate's success probability {best:.2f} is below the floor "
                f"{self.floor:.2f}")


class SparseEvidence(Gate):
    """Fires when fewer than ``min_candidates`` candidates have any recorded outcome."""

    name: ClassVar[str] = "sparse_evidence"
    min_candidates: int = Field(default=2, ge=1)

    def __call__(self, view: GateView) -> str | None:
        """Count candidates with at least one execution of this task type."""
        seen = sum(1 for c in view.candidates if c.executions > 0)
        if seen >= self.min_candidates:
            return None
        return (f"only {seen} candidate(s) have outcomes for {view.task_type!r}; "
                f"{self.min_candidates} needed")


class Conflicted(Gate):
    """Fires when the runner-up is better than the chosen agent with probability > ceiling."""

    name: ClassVar[str] = "conflicted"
    ceiling: float = Field(default=0.4, ge=0, le=1)

    def __call__(self, view: GateView) -> str | None:
        """Normal approximation of P(runner-up's success rate > chosen's)."""
        if len(view.candidates) < 2:
            return None
        first, second = view.candidates[0], view.candidates[1]
        p1, p2 = first.success_probability, second.success_probability
        chance = runner_up_chance(0.5 if p1 is None else p1, first.executions,
                                  0.5 if p2 is None else p2, second.executions)
        if chance <= self.ceiling:
            return None
        return (f"{second.agent_id!r} is better than {first.agent_id!r} with probability "
                f"{chance:.2f} (ceiling {self.ceiling:.2f}): a coin toss")


def runner_up_chance(p1: float, n1: int, p2: float, n2: int) -> float:
    """P(second's rate > first's), each rate ~ Normal(p, p(1-p)/(n+3)) (Beta variance)."""
    var = p1 * (1 - p1) / (n1 + 3) + p2 * (1 - p2) / (n2 + 3)
    if var <= 0.0:
        return 1.0 if p2 > p1 else 0.5 if p2 == p1 else 0.0
    return 0.5 * math.erfc((p1 - p2) / math.sqrt(2.0 * var))


class AbstentionPolicy(Settings):
    """When the router abstains (its gates) and what it then does (config ``abstention``)."""

    on_abstain: OnAbstain = "route_anyway"
    weak_resonance: WeakResonance = Field(default_factory=WeakResonance)
    sparse_evidence: SparseEvidence = Field(default_factory=SparseEvidence)
    conflicted: Conflicted = Field(default_factory=Conflicted)

    @cached_property
    def gates(self) -> tuple[Gate, ...]:
        """The enabled gates, in evaluation order."""
        return tuple(g for g in (self.weak_resonance, self.sparse_evidence, self.conflicted)
                     if g.enabled)

    def evaluate(self, view: GateView) -> tuple[str, str] | None:
        """(gate name, explanation) of the first enabled gate that fires, or None."""
        for gate in self.gates:
            detail = gate(view)
            if detail is not None:
                return gate.name, detail
        return None


class Abstained(RouterError):
    """The router abstained and the policy says ``on_abstain: raise``."""

    def __init__(self, decision: RoutingDecision, detail: str = "") -> None:
        self.decision = decision
        self.reason = decision.abstain_reason
        msg = f"router abstained on task type {decision.task_type!r}: {decision.abstain_reason}"
        super().__init__(f"{msg} ({detail})" if detail else msg)

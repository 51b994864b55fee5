"""Abstention: a router that says "I don't know" instead of guessing.

Gates are tiny callable classes (in the style of tenacity's stop/wait conditions), each
answering one question about a ranked decision and returning a one-line explanation
when it fires. ``AbstentionPolicy`` evaluates them in order; the first that fires is
reported as the decision's ``abstain_reason`` (the gate's name) and the router then
routes anyway (flagged), hands the task to a person, or raises ``Abstained``.

- ``weak_resonance`` (on by default): no eligible candidate's calibrated success
  probability reaches the floor (0.5: even the best option is more likely to fail than
  to succeed). Candidates with no estimate at all are unknown, not weak: that is what
  ``sparse_evidence`` is for.
- ``sparse_evidence``: fewer than ``min_candidates`` (2: a choice is informed only when
  at least two options have been seen to compare) candidates have any recorded outcome
  for this task type.
- ``conflicted``: the probability that the runner-up is actually better than the chosen
  agent (normal approximation of the two success estimates, each with the variance of a
  Beta posterior after its executions) exceeds the ceiling (0.4; 0.5 is a pure coin toss).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from trustroute.router.decision import CandidateScore
from trustroute.router.errors import RouterError

if TYPE_CHECKING:
    from trustroute.router.decision import RoutingDecision

OnAbstain = Literal["route_anyway", "human", "raise"]
ON_ABSTAIN_CHOICES: tuple[str, ...] = ("route_anyway", "human", "raise")


class GateView(NamedTuple):
    """What a gate may look at: the ranked candidates and their success estimates.

    A named tuple because one is built on every decision (cheapest to create).
    """

    task_type: str
    candidates: Sequence[CandidateScore]  # best first
    probabilities: Sequence[float | None]  # raw success estimates, same order
    calibrate: Callable[[float], float]
    confidence: float = 0.0  # the chosen candidate's calibrated success probability


class Gate(Protocol):
    """One abstention condition."""

    name: str

    def __call__(self, view: GateView) -> str | None:
        """A one-line explanation when the gate fires, else None."""
        ...


def _unit(value: float, name: str) -> float:
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"abstention.{name} must be within [0, 1], got {value}")
    return float(value)


class WeakResonance:
    """Fires when no candidate's calibrated success probability reaches ``floor``."""

    name = "weak_resonance"

    def __init__(self, floor: float = 0.5) -> None:
        self.floor = _unit(floor, "weak_resonance.floor")

    def __call__(self, view: GateView) -> str | None:
        """Best calibrated estimate below the floor (unknown estimates never fire)."""
        if view.confidence >= self.floor:  # the chosen one reaches it: nothing to check
            return None
        known = [p for p in view.probabilities if p is not None]
        if not known:
            return None
        best = view.calibrate(max(known))
        if best >= self.floor:
            return None
        return (f"best candidate's success probability {best:.2f} is below the floor "
                f"{self.floor:.2f}")


class SparseEvidence:
    """Fires when fewer than ``min_candidates`` candidates have any recorded outcome."""

    name = "sparse_evidence"

    def __init__(self, min_candidates: int = 2) -> None:
        if min_candidates < 1:
            raise ValueError("abstention.sparse_evidence.min_candidates must be >= 1")
        self.min_candidates = min_candidates

    def __call__(self, view: GateView) -> str | None:
        """Count candidates with at least one execution of this task type."""
        seen = sum(1 for c in view.candidates if c.executions > 0)
        if seen >= self.min_candidates:
            return None
        return (f"only {seen} candidate(s) have outcomes for {view.task_type!r}; "
                f"{self.min_candidates} needed")


class Conflicted:
    """Fires when the runner-up is better than the chosen agent with probability > ceiling."""

    name = "conflicted"

    def __init__(self, ceiling: float = 0.4) -> None:
        self.ceiling = _unit(ceiling, "conflicted.ceiling")

    def __call__(self, view: GateView) -> str | None:
        """Normal approximation of P(runner-up's success rate > chosen's)."""
        if len(view.candidates) < 2:
            return None
        first, second = view.candidates[0], view.candidates[1]
        p1 = view.probabilities[0]
        p2 = view.probabilities[1]
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


GATES: dict[str, type[WeakResonance] | type[SparseEvidence] | type[Conflicted]] = {
    WeakResonance.name: WeakResonance,
    SparseEvidence.name: SparseEvidence,
    Conflicted.name: Conflicted,
}


@dataclass(frozen=True, slots=True)
class AbstentionPolicy:
    """Gates in evaluation order and what to do when one fires."""

    gates: tuple[Gate, ...] = (WeakResonance(),)
    on_abstain: OnAbstain = "route_anyway"

    def __post_init__(self) -> None:
        if self.on_abstain not in ON_ABSTAIN_CHOICES:
            raise ValueError(f"abstention.on_abstain must be one of "
                             f"{', '.join(ON_ABSTAIN_CHOICES)}; got {self.on_abstain!r}")

    def evaluate(self, view: GateView) -> tuple[str, str] | None:
        """(gate name, explanation) of the first gate that fires, or None."""
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

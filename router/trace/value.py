"""``evaluate_value``: one number in [0, 1] for how valuable a reasoning trace is.

``value = C·wC + N·wN + D·wD + O·wO`` (complexity, novelty, tool diversity, outcome
confidence), with weights chosen by ``metadata.task_domain`` (an unknown domain uses the
default weights, silently). Then three rule overrides, in this order:

1. a trace that is exactly one ``thought`` step scores 0.1 (nothing was done);
2. more than 2 error recoveries on a successful trace add 0.1, capped at 1 (resilience);
3. tools used but at most one unique tool subtract 0.1, floored at 0 (no exploration).

The weight table and overrides are the reference design's; finance and medical weigh
the outcome most because a wrong answer costs most there, code weighs tool diversity
because good coding runs read, run and test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trustroute.router.trace.components import (
    complexity,
    error_recoveries,
    outcome_confidence,
    tool_diversity,
    unique_tools,
)
from trustroute.router.trace.model import ReasoningTrace
from trustroute.router.trace.novelty import Embedder, NoveltyCache, anovelty, novelty

SINGLE_THOUGHT_SCORE = 0.1
RECOVERY_BONUS = 0.1
RECOVERY_BONUS_MIN_RECOVERIES = 3  # "more than 2"
SINGLE_TOOL_PENALTY = 0.1


@dataclass(frozen=True, slots=True)
class TraceWeights:
    """Weights of complexity, novelty, tool diversity and outcome confidence (sum 1)."""

    complexity: float
    novelty: float
    tool_diversity: float
    outcome_confidence: float

    def __post_init__(self) -> None:
        values = (self.complexity, self.novelty, self.tool_diversity,
                  self.outcome_confidence)
        if any(not 0.0 <= w <= 1.0 for w in values):
            raise ValueError(f"trace weights must each be in [0, 1], got {values}")
        if abs(sum(values) - 1.0) > 1e-9:
            raise ValueError(f"trace weights must sum to 1, got {sum(values)}")


DEFAULT_WEIGHTS = TraceWeights(0.25, 0.35, 0.15, 0.25)
DOMAIN_WEIGHTS: Mapping[str, TraceWeights] = {
    "finance": TraceWeights(0.20, 0.25, 0.10, 0.45),
    "code": TraceWeights(0.20, 0.30, 0.30, 0.20),
    "medical": TraceWeights(0.15, 0.20, 0.10, 0.55),
    "customer_service": TraceWeights(0.20, 0.30, 0.20, 0.30),
}


def weights_for(domain: str | None) -> TraceWeights:
    """The weights of ``domain``; the default weights for any other domain."""
    return DOMAIN_WEIGHTS.get(domain or "", DEFAULT_WEIGHTS)


def combine(trace: ReasoningTrace, novelty_value: float,
            weights: TraceWeights | None = None) -> float:
    """The weighted sum with the rule overrides applied, given the novelty component."""
    w = weights or weights_for(trace.task_domain)
    score = (complexity(trace) * w.complexity + novelty_value * w.novelty
             + tool_diversity(trace) * w.tool_diversity
             + outcome_confidence(trace) * w.outcome_confidence)
    if len(trace.steps) == 1 and trace.steps[0].type == "thought":
        score = SINGLE_THOUGHT_SCORE
    if trace.success and error_recoveries(trace) >= RECOVERY_BONUS_MIN_RECOVERIES:
        score = min(1.0, score + RECOVERY_BONUS)
    uses_tools = any(s.tool or s.type == "tool_call" for s in trace.steps)
    if uses_tools and len(unique_tools(trace)) <= 1:
        score = max(0.0, score - SINGLE_TOOL_PENALTY)
    return min(1.0, max(0.0, score))


def evaluate_value(trace: ReasoningTrace, *, embedder: Embedder | None = None,
                   cache: NoveltyCache | None = None,
                   weights: TraceWeights | None = None) -> float:
    """The value of ``trace`` in [0, 1].

    Without an embedder novelty is 0.5. With one, the trace is compared with (and then
    added to) ``cache``, or the process-wide cache when none is given.
    """
    return combine(trace, novelty(trace, embedder, cache), weights)


async def aevaluate_value(trace: ReasoningTrace, *, embedder: Embedder | None = None,
                          cache: NoveltyCache | None = None,
                          weights: TraceWeights | None = None) -> float:
    """Async ``evaluate_value`` (awaits the embedder's ``aembed_query``)."""
    return combine(trace, await anovelty(trace, embedder, cache), weights)

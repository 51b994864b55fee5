"""Trace quality scoring: turn what an agent did into a quality number in [0, 1].

Pure: models, component math, the weight table and a local vector cache. Collecting a
trace from a LangChain run lives in ``trustroute.integrations.langchain.callbacks``.
"""

from trustroute.router.trace.components import (
    complexity,
    error_recoveries,
    outcome_confidence,
    tool_diversity,
    unique_tools,
)
from trustroute.router.trace.model import (
    DEFAULT_DOMAIN,
    STEP_TYPES,
    ReasoningTrace,
    TraceMetadata,
    TraceOutcome,
    TraceStep,
)
from trustroute.router.trace.novelty import (
    NEUTRAL_NOVELTY,
    Embedder,
    NoveltyCache,
    anovelty,
    novelty,
    shared_novelty_cache,
    trace_text,
)
from trustroute.router.trace.value import (
    DEFAULT_WEIGHTS,
    DOMAIN_WEIGHTS,
    TraceWeights,
    aevaluate_value,
    combine,
    evaluate_value,
    weights_for,
)

__all__ = [
    "DEFAULT_DOMAIN",
    "DEFAULT_WEIGHTS",
    "DOMAIN_WEIGHTS",
    "NEUTRAL_NOVELTY",
    "STEP_TYPES",
    "Embedder",
    "NoveltyCache",
    "ReasoningTrace",
    "TraceMetadata",
    "TraceOutcome",
    "TraceStep",
    "TraceWeights",
    "aevaluate_value",
    "anovelty",
    "combine",
    "complexity",
    "error_recoveries",
    "evaluate_value",
    "novelty",
    "outcome_confidence",
    "shared_novelty_cache",
    "tool_diversity",
    "trace_text",
    "unique_tools",
    "weights_for",
]

"""The trace-value components that need no embedder: complexity, tool diversity,
outcome confidence, and the counts the rule overrides read.

Each component is a pure function of the trace with a value in [0, 1]. The constants
are the reference design's (KnowledgePulse trace scoring); the docstrings say what each
one rewards and why, so the numbers can be argued with rather than guessed at.
"""

from __future__ import annotations

from trustroute.router.trace.model import STEP_TYPES, ReasoningTrace

COMPLEXITY_TYPE_WEIGHT = 0.5
COMPLEXITY_RECOVERY_WEIGHT = 0.3
COMPLEXITY_LENGTH_WEIGHT = 0.2
COMPLEXITY_LENGTH_SATURATION = 20
TOOL_CYCLE_STEPS = 3
FAILED_OUTCOME_FACTOR = 0.3


def error_recoveries(trace: ReasoningTrace) -> int:
    """Error steps the run got past.

    On a successful trace every error was recovered from (the run still succeeded);
    on a failed trace only the errors followed by further non-error work count, since
    the last errors are what ended it.
    """
    if trace.success:
        return sum(1 for s in trace.steps if s.type == "error")
    recovered, seen_work_after = 0, False
    for step in reversed(trace.steps):
        if step.type != "error":
            seen_work_after = True
        elif seen_work_after:
            recovered += 1
    return recovered


def unique_tools(trace: ReasoningTrace) -> frozenset[str]:
    """Names of the distinct tools any step used."""
    return frozenset(s.tool for s in trace.steps if s.tool)


def complexity(trace: ReasoningTrace) -> float:
    """C = 0.5 · k/4 + 0.3 · r + 0.2 · min(1, n/20), in [0, 1].

    ``k`` is how many of the four step kinds (thought, tool_call, observation, error)
    occur, ``r`` is 1 when the run recovered from at least one error (else 0) and ``n``
    is the number of steps. Breadth of behaviour weighs most: a run that only thinks is
    simpler than one that thinks, acts and reads results. Getting past an error shows
    non-trivial handling. Length counts least and saturates at 20 steps, so a merely
    verbose trace cannot look complex. An empty trace scores 0.
    """
    if not trace.steps:
        return 0.0
    kinds = len({s.type for s in trace.steps}) / len(STEP_TYPES)
    recovered = 1.0 if error_recoveries(trace) > 0 else 0.0
    length = min(1.0, len(trace.steps) / COMPLEXITY_LENGTH_SATURATION)
    value = (COMPLEXITY_TYPE_WEIGHT * kinds + COMPLEXITY_RECOVERY_WEIGHT * recovered
             + COMPLEXITY_LENGTH_WEIGHT * length)
    return min(1.0, value)


def tool_diversity(trace: ReasoningTrace) -> float:
    """D = min(1, 3 · u / n), in [0, 1]: distinct tools per tool-use cycle.

    ``u`` is the number of distinct tool names and ``n`` the number of steps. A tool use
    is typically a cycle of three steps (thought, call, observation), so a trace in
    which every cycle uses a different tool scores 1; calling the same tool again, or
    padding the trace with steps that use no new tool, lowers it. No tool: 0.
    """
    if not trace.steps:
        return 0.0
    return min(1.0, TOOL_CYCLE_STEPS * len(unique_tools(trace)) / len(trace.steps))


def outcome_confidence(trace: ReasoningTrace) -> float:
    """O = confidence on success, 0.3 · confidence on failure, in [0, 1].

    A failed run still teaches something (what did not work), but far less than a
    success of the same confidence.
    """
    factor = 1.0 if trace.success else FAILED_OUTCOME_FACTOR
    return trace.outcome.confidence * factor

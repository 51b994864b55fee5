"""Complexity, tool diversity, outcome confidence and error recoveries, at their
definitions (see the docstrings in profiles/trace/components.py), and trace validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trustroute.router.trace import (
    ReasoningTrace,
    TraceStep,
    complexity,
    error_recoveries,
    outcome_confidence,
    tool_diversity,
)


def trace(*kinds: str, success: bool = True, confidence: float = 1.0,
          tools: dict[int, str] | None = None) -> ReasoningTrace:
    tools = tools or {}
    steps = [{"type": k, "content": k, "tool": tools.get(i)} for i, k in enumerate(kinds)]
    return ReasoningTrace(objective="o", steps=steps,
                          outcome={"success": success, "confidence": confidence})


def test_complexity_counts_kinds_recovery_and_saturating_length() -> None:
    assert complexity(trace()) == 0.0
    assert complexity(trace("thought")) == pytest.approx(0.5 / 4 + 0.2 / 20)
    assert complexity(trace("thought", "tool_call", "observation")) == \
        pytest.approx(0.5 * 3 / 4 + 0.2 * 3 / 20)
    # a recovered error adds 0.3
    assert complexity(trace("thought", "error", "thought")) == \
        pytest.approx(0.5 * 2 / 4 + 0.3 + 0.2 * 3 / 20)
    # length saturates at 20 steps: 40 thoughts are no more complex than 20
    assert complexity(trace(*["thought"] * 40)) == complexity(trace(*["thought"] * 20)) \
        == pytest.approx(0.5 / 4 + 0.2)
    full = ["thought", "tool_call", "observation", "error"] * 5
    assert complexity(trace(*full)) == pytest.approx(1.0)


def test_an_error_that_ended_a_failed_run_is_not_a_recovery() -> None:
    failed = trace("thought", "error", "thought", "error", "error", success=False)
    assert error_recoveries(failed) == 1  # only the first error was followed by work
    assert complexity(failed) == pytest.approx(0.5 * 2 / 4 + 0.3 + 0.2 * 5 / 20)
    dead = trace("thought", "error", success=False)
    assert error_recoveries(dead) == 0
    assert complexity(dead) == pytest.approx(0.5 * 2 / 4 + 0.2 * 2 / 20)
    # on a successful run every error was got past
    assert error_recoveries(trace("error", "error", "error", "thought")) == 3
    assert error_recoveries(trace("thought", "error")) == 1


def test_tool_diversity_is_distinct_tools_per_three_step_cycle() -> None:
    assert tool_diversity(trace()) == 0.0
    assert tool_diversity(trace("thought", "observation")) == 0.0
    one_cycle = trace("thought", "tool_call", "observation", tools={1: "search"})
    assert tool_diversity(one_cycle) == pytest.approx(1.0)
    same_tool = trace(*["tool_call"] * 6, tools={i: "search" for i in range(6)})
    assert tool_diversity(same_tool) == pytest.approx(3 * 1 / 6)
    two_tools = trace(*["tool_call"] * 6, tools={i: ("a" if i % 2 else "b") for i in range(6)})
    assert tool_diversity(two_tools) == pytest.approx(1.0)
    padded = trace("tool_call", *["thought"] * 9, tools={0: "a"})
    assert tool_diversity(padded) == pytest.approx(3 * 1 / 10)


def test_outcome_confidence_discounts_failures() -> None:
    assert outcome_confidence(trace(confidence=0.8)) == pytest.approx(0.8)
    assert outcome_confidence(trace(success=False, confidence=0.8)) == pytest.approx(0.24)
    assert outcome_confidence(trace(success=False, confidence=0.0)) == 0.0


def test_trace_validation_names_the_field() -> None:
    with pytest.raises(ValidationError, match="type"):
        TraceStep(type="musing")
    with pytest.raises(ValidationError, match="confidence"):
        ReasoningTrace(outcome={"success": True, "confidence": 1.5})
    with pytest.raises(ValidationError, match="confidence"):
        ReasoningTrace(outcome={"success": True, "confidence": float("nan")})
    with pytest.raises(ValidationError, match="outcome"):
        ReasoningTrace(objective="no outcome")
    with pytest.raises(ValidationError, match="tool"):
        TraceStep(type="tool_call", tool="  ")


def test_reference_step_names_are_accepted() -> None:
    step = TraceStep.model_validate({"type": "error_recovery", "tool": {"name": "fix"}})
    assert step.type == "error" and step.tool == "fix"

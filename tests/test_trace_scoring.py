"""Trace value: the weighted sum per domain and the three rule overrides, in order.

Expected values are worked out by hand from the formulas in profiles/trace (novelty is
0.5 without an embedder).
"""

from __future__ import annotations

import pytest

from trustroute.router.trace import (
    DEFAULT_WEIGHTS,
    DOMAIN_WEIGHTS,
    ReasoningTrace,
    TraceWeights,
    evaluate_value,
    weights_for,
)


def trace(steps: list[dict], *, success: bool = True, confidence: float = 1.0,
          domain: str = "default") -> ReasoningTrace:
    return ReasoningTrace(objective="task", steps=steps,
                          outcome={"success": success, "confidence": confidence},
                          metadata={"task_domain": domain})


def thought(text: str = "thinking") -> dict:
    return {"type": "thought", "content": text}


def call(tool: str) -> dict:
    return {"type": "tool_call", "tool": tool, "content": f"{tool}()"}


def observe(text: str = "result") -> dict:
    return {"type": "observation", "content": text}


def error(text: str = "failed") -> dict:
    return {"type": "error", "content": text}


# thought, search, observation, calc, observation; success, confidence 0.8:
# C = 0.5·3/4 + 0 + 0.2·5/20 = 0.425; D = min(1, 3·2/5) = 1; O = 0.8; N = 0.5
TWO_TOOLS = [thought(), call("search"), observe(), call("calc"), observe()]


@pytest.mark.parametrize(("domain", "expected"), [
    ("default", 0.425 * .25 + .5 * .35 + 1 * .15 + .8 * .25),   # 0.63125
    ("finance", 0.425 * .20 + .5 * .25 + 1 * .10 + .8 * .45),   # 0.67
    ("code", 0.425 * .20 + .5 * .30 + 1 * .30 + .8 * .20),      # 0.695
    ("medical", 0.425 * .15 + .5 * .20 + 1 * .10 + .8 * .55),   # 0.70375
    ("customer_service", 0.425 * .20 + .5 * .30 + 1 * .20 + .8 * .30),  # 0.675
    ("underwater_basket_weaving", 0.63125),  # unknown domain: default weights, silently
])
def test_domain_weights(domain: str, expected: float) -> None:
    assert evaluate_value(trace(TWO_TOOLS, confidence=0.8, domain=domain)) == \
        pytest.approx(expected)


def test_weight_table_is_the_reference_table() -> None:
    assert (DEFAULT_WEIGHTS.complexity, DEFAULT_WEIGHTS.novelty, DEFAULT_WEIGHTS.tool_diversity,
            DEFAULT_WEIGHTS.outcome_confidence) == (.25, .35, .15, .25)
    assert weights_for("finance") == TraceWeights(.20, .25, .10, .45)
    assert weights_for("code") == TraceWeights(.20, .30, .30, .20)
    assert weights_for("medical") == TraceWeights(.15, .20, .10, .55)
    assert weights_for("customer_service") == TraceWeights(.20, .30, .20, .30)
    assert weights_for("nope") is DEFAULT_WEIGHTS and weights_for(None) is DEFAULT_WEIGHTS
    assert set(DOMAIN_WEIGHTS) == {"finance", "code", "medical", "customer_service"}


def test_weights_must_sum_to_one() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        TraceWeights(0.5, 0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        TraceWeights(1.5, -0.5, 0.0, 0.0)


@pytest.mark.parametrize("domain", ["default", "finance", "code", "medical", "nope"])
@pytest.mark.parametrize("success", [True, False])
def test_exactly_one_thought_scores_point_one(domain: str, success: bool) -> None:
    assert evaluate_value(trace([thought()], success=success, domain=domain)) == \
        pytest.approx(0.1)


def test_one_thought_among_other_steps_is_not_the_override() -> None:
    # two thoughts: C = 0.5·1/4 + 0.2·2/20 = 0.145; D = 0; O = 1
    expected = 0.145 * .25 + .5 * .35 + 0 + 1 * .25
    assert evaluate_value(trace([thought(), thought("more")])) == pytest.approx(expected)


def test_more_than_two_recoveries_on_success_add_point_one() -> None:
    # thought, 3 errors, add, observation, mul, observation (8 steps):
    # C = 0.5·4/4 + 0.3 + 0.2·8/20 = 0.88; D = min(1, 3·2/8) = 0.75; O = 1
    steps = [thought(), error(), error(), error(), call("add"), observe(), call("mul"),
             observe()]
    base = 0.88 * .25 + .5 * .35 + .75 * .15 + 1 * .25  # 0.7575
    assert evaluate_value(trace(steps)) == pytest.approx(base + 0.1)
    # the same run failing gets no bonus (and O = 0.3 · confidence)
    failed = 0.88 * .25 + .5 * .35 + .75 * .15 + .3 * .25
    assert evaluate_value(trace(steps, success=False)) == pytest.approx(failed)


def test_two_recoveries_get_no_bonus() -> None:
    steps = [thought(), error(), error(), call("add"), observe(), call("mul"), observe()]
    # C = 0.5 + 0.3 + 0.2·7/20 = 0.87; D = min(1, 6/7)
    expected = 0.87 * .25 + .5 * .35 + (6 / 7) * .15 + 1 * .25
    assert evaluate_value(trace(steps)) == pytest.approx(expected)


def test_single_tool_subtracts_point_one() -> None:
    steps = [thought(), call("search"), call("search"), observe()]
    # C = 0.5·3/4 + 0.2·4/20 = 0.415; D = min(1, 3·1/4) = 0.75
    expected = 0.415 * .25 + .5 * .35 + .75 * .15 + 1 * .25 - 0.1  # 0.54125
    assert evaluate_value(trace(steps)) == pytest.approx(expected)


def test_no_tools_no_penalty_and_two_tools_no_penalty() -> None:
    steps = [thought(), observe(), thought("again")]
    # C = 0.5·2/4 + 0.2·3/20 = 0.28; D = 0
    assert evaluate_value(trace(steps)) == pytest.approx(0.28 * .25 + .5 * .35 + 1 * .25)
    two = [thought(), call("search"), call("summarize"), observe()]
    # C = 0.415; D = min(1, 6/4) = 1
    assert evaluate_value(trace(two)) == pytest.approx(0.415 * .25 + .5 * .35 + .15 + .25)


def test_overrides_apply_in_order_bonus_capped_before_penalty() -> None:
    # complexity and outcome only, both 1: 20 steps of all four kinds, >2 recoveries,
    # one tool. Bonus first: min(1, 1.0 + 0.1) = 1.0, then penalty: 0.9.
    # (Penalty first would give min(1, 0.9 + 0.1) = 1.0.)
    steps = [thought(), error(), error(), error()] + [call("only"), observe()] * 8
    assert len(steps) == 20
    w = TraceWeights(0.5, 0.0, 0.0, 0.5)
    assert evaluate_value(trace(steps), weights=w) == pytest.approx(0.9)


def test_penalty_floors_at_zero() -> None:
    w = TraceWeights(0.0, 0.0, 0.0, 1.0)
    lone_call = trace([call("t")], success=False, confidence=0.0)
    assert evaluate_value(lone_call, weights=w) == 0.0


def test_value_stays_in_unit_interval_for_extreme_traces() -> None:
    many = [thought(), call("a"), observe(), error()] * 30
    for success in (True, False):
        for confidence in (0.0, 1.0):
            v = evaluate_value(trace(many, success=success, confidence=confidence))
            assert 0.0 <= v <= 1.0
    assert evaluate_value(trace([])) == pytest.approx(0.5 * .35 + 1 * .25)


def test_reference_interchange_shape_scores_the_same() -> None:
    ref = ReasoningTrace.model_validate({
        "@context": "https://openknowledgepulse.org/schema/v1", "@type": "ReasoningTrace",
        "id": "kp:trace:1", "task": {"objective": "Test objective"},
        "metadata": {"task_domain": "testing", "success": True},
        "steps": [{"step_id": 0, "type": "thought", "content": "Thinking"},
                  {"step_id": 1, "type": "tool_call", "tool": {"name": "search"}},
                  {"step_id": 2, "type": "observation", "content": "Found"}],
        "outcome": {"result_summary": "Completed", "confidence": 1.0},
    })
    assert ref.objective == "Test objective" and ref.success is True
    # C = 0.5·3/4 + 0.2·3/20 = 0.405; D = 1; O = 1; one tool: -0.1
    assert evaluate_value(ref) == pytest.approx(0.405 * .25 + .5 * .35 + .15 + .25 - .1)

"""Contradictions from real LangChain fallbacks: a failing agent rescued by the next one."""

from __future__ import annotations

import pytest
from langchain_core.runnables import RunnableLambda

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.router import AgentRouter
from trustroute.router.trust.scores import Tier, frequency_score


def test_fallback_rescues_are_contradictions_and_end_in_deprecation(
        router: AgentRouter) -> None:
    for _ in range(10):  # 'a' looks best on past runs
        router.record(agent_id="a", task_type="code", success=True)

    def down(x: str) -> str:
        raise ValueError("a is down")

    routed = RoutedRunnable(router=router, task_type=fixed_task_type("code"),
                            agents={"a": RunnableLambda(down),
                                    "b": RunnableLambda(lambda x: f"b:{x}")})
    for i in range(12):
        assert routed.invoke(f"q{i}") == f"b:q{i}"
    counts = router.trust_layer.book.counts("a", "code")
    assert counts.negative >= 1
    assert counts.contradictions == counts.negative  # every failure of 'a' was rescued
    assert router.trust_layer.book.counts("b", "code").contradictions == 0
    assert router.trust("a", "code").frequency == pytest.approx(
        frequency_score(counts.observations, counts.contradictions))
    router.signal("a", "code", "pattern_contradicted")  # a person confirms it, 9 more times
    for _ in range(9):
        router.signal("a", "code", "pattern_contradicted")
    assert router.trust("a", "code").frequency == 0.0
    router.review("a", "code", approved=False)
    for _ in range(12):
        router.signal("a", "code", "user_corrected")
    assert router.trust("a", "code").tier == Tier.DEPRECATED
    for i in range(5):  # 'a' is no longer tried first
        assert routed.invoke(f"r{i}") == f"b:r{i}"
    assert router.trust_layer.book.counts("a", "code").negative == counts.negative

"""What a run without quality evidence reports (docs/feedback.md): ``record()``'s
returned record carries the quality the router counts it with, never a made-up 1.0."""

from __future__ import annotations

import time

import pytest

from trustroute import AgentRouter


@pytest.mark.parametrize(("policy", "quality"), [
    ({"wait_s": 3600}, None),                      # awaits a verdict
    ({"wait_s": 3600, "default": "ignore"}, None),
    ({}, 1.0),                                     # wait_s 0: a success is 1.0 at once
    ({"default": 0.3}, 1.0),                       # (the default settles only a wait)
])
def test_record_returns_the_quality_the_run_counts_with(
        policy: dict[str, object], quality: float | None) -> None:
    with AgentRouter(["a"], store="mem://", feedback=policy) as router:
        rec = router.record(agent_id="a", task_type="chat", success=True)
        assert rec.quality == quality
        assert rec.model_dump(mode="json")["quality"] == quality
        given = router.record(agent_id="a", task_type="chat", success=True, quality=0.6)
        assert given.quality == 0.6  # given: evidence at once, whatever the policy
        failed = router.record(agent_id="a", task_type="chat", success=False)
        assert failed.quality == 0.0


def test_a_pending_record_settles_like_any_other_when_its_verdict_comes() -> None:
    with AgentRouter(["a"], store="mem://", feedback={"wait_s": 3600}) as router:
        rec = router.record(agent_id="a", task_type="chat", success=True)
        assert rec.quality is None
        router.feedback(rec.record_id, score=0.25)
        assert router.profile("a", "chat").avg_quality == pytest.approx(0.25)


@pytest.mark.parametrize("policy", [{"wait_s": 3600}, {"wait_s": 0.05, "default": "ignore"}])
def test_a_mean_over_no_judged_run_is_none_not_zero(policy: dict[str, object]) -> None:
    with AgentRouter(["a"], store="mem://", feedback=policy) as router:
        assert router.profile("a", "chat").avg_quality is None  # never run
        router.record(agent_id="a", task_type="chat", success=True)
        time.sleep(0.1)  # past the short wait: settled, as no quality evidence
        p = router.profile("a", "chat")
        assert p.executions_total == 1 and p.avg_quality is None
        assert p.model_dump(mode="json")["avg_quality"] is None
        assert (p.expertise, p.adjusted_score) == (0.0, 0.0)  # ranking inputs: the bottom
        router.record(agent_id="a", task_type="chat", success=True, quality=0.4)
        assert router.profile("a", "chat").avg_quality == pytest.approx(0.4)

"""Explanations built on first read hold exactly what an eager build would."""

from __future__ import annotations

import dataclasses
import pickle

from trustroute.router import AgentRouter
from trustroute.router.decision import CandidateScore
from trustroute.router.explanation import Deferred


class _Counting(Deferred):
    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls = 0

    def explain(self, key: object) -> tuple[str, dict[str, float]]:
        self.calls += 1
        return f"because {key}", {"key": float(str(key))}


def test_deferred_candidate_is_explained_once_and_equals_an_eager_one() -> None:
    explainer = _Counting()
    lazy = CandidateScore.deferred("a", 0.5, 0.25, 0.125, 5, 0.0, 0.7, 0.7, explainer, 3)
    assert explainer.calls == 0
    eager = CandidateScore("a", 0.5, 0.25, 0.125, 5, 0.0, 0.7, 0.7, "because 3", {"key": 3.0})
    assert lazy.components == {"key": 3.0} and lazy.reason == "because 3"
    assert explainer.calls == 1 and lazy == eager
    assert dataclasses.asdict(lazy) == dataclasses.asdict(eager)
    assert dataclasses.replace(lazy, reason="x").components == {"key": 3.0}


def test_thompson_reasons_match_components_and_survive_pickling() -> None:
    with AgentRouter(agents=["a", "b", "c"], store="mem://", seed=3) as router:
        for _ in range(5):
            router.record(agent_id="a", task_type="t", success=True, quality=0.9)
        decision = router.select("t")
        for c in decision.candidates:
            comps = c.components
            assert c.reason.startswith(f"Thompson draw {comps['sample']:.2f}; mean "
                                       f"{comps['posterior_mean']:.2f}")
            assert f"pooled prior {comps['prior_mean']:.2f}" in c.reason
            assert comps["objective"] == c.score
            copy = pickle.loads(pickle.dumps(c))
            assert copy == c and copy.reason == c.reason
        logged = decision.as_dict()["candidates"]
        assert [row["reason"] for row in logged] == [c.reason for c in decision.candidates]

"""When every agent fails, the first agent's own exception is raised (as LangChain's
RunnableWithFallbacks does), with the others attached: retry rules keyed on provider
errors keep working."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda
from langchain_helpers import chunks, executions, prefer

from trustroute.integrations.langchain import AllAgentsFailed, RoutedRunnable
from trustroute.router import AgentRouter
from trustroute.router.trust.abstention import Abstained, AbstentionPolicy


class RateLimited(Exception):
    """A provider's error type, as a retry rule would name it."""


def limited(agent_id: str) -> RunnableLambda:
    def call(x: Any) -> Any:
        raise RateLimited(f"{agent_id} is rate limited")

    return RunnableLambda(call)


def both_limited(router: AgentRouter, **kwargs: Any) -> RoutedRunnable:
    prefer(router, "a", "code")
    return RoutedRunnable(router=router, task_type=lambda _: "code",
                          agents={"a": limited("a"), "b": limited("b")}, **kwargs)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream", "batch"])
def test_the_first_agents_error_is_raised_with_its_own_type(router: AgentRouter,
                                                            mode: str) -> None:
    routed = both_limited(router)
    with pytest.raises(RateLimited) as info:
        if mode == "invoke":
            routed.invoke("x")
        elif mode == "ainvoke":
            asyncio.run(routed.ainvoke("x"))
        elif mode == "batch":
            routed.batch(["x"])
        else:
            chunks(routed, mode, "x")
    assert str(info.value) == "a is rate limited"  # the first agent's, unchanged
    assert [(e["agent_id"], e["success"]) for e in executions(router)[-2:]] == \
        [("a", False), ("b", False)]
    assert router.in_flight("a") == router.in_flight("b") == 0
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "all 2 agent(s) tried for task type 'code' failed" in notes
    assert "b: RateLimited: b is rate limited" in notes


def test_an_exception_object_raised_again_carries_one_summary(router: AgentRouter) -> None:
    shared = RateLimited("quota exhausted")  # some clients raise a cached error object

    def out_of_quota(x: Any) -> Any:
        raise shared

    routed = RoutedRunnable(router=router, task_type=lambda _: "code",
                            agents={"a": RunnableLambda(out_of_quota),
                                    "b": RunnableLambda(out_of_quota)})
    for _ in range(3):
        with pytest.raises(RateLimited) as info:
            routed.invoke("x")
        assert info.value is shared
    assert len(shared.__notes__) == 1  # it grew by one summary per task
    summary = AllAgentsFailed.of(shared)
    assert summary is not None and sorted(summary.errors) == ["a", "b"]


def test_the_others_are_attached_as_all_agents_failed(router: AgentRouter) -> None:
    with pytest.raises(RateLimited) as info:
        both_limited(router).invoke("x")
    summary = AllAgentsFailed.of(info.value)
    assert summary is not None and summary.task_type == "code"
    assert list(summary.errors) == ["a", "b"] and summary.errors["a"] is info.value
    assert str(summary.errors["b"]) == "b is rate limited"
    assert AllAgentsFailed.of(ValueError("not from a routed task")) is None


def test_a_retry_rule_on_the_provider_error_retries_the_task(router: AgentRouter) -> None:
    calls = {"n": 0}

    def flaky(x: str) -> str:
        calls["n"] += 1
        if calls["n"] <= 2:  # both agents fail the first task
            raise RateLimited(f"flaky {calls['n']}")
        return f"ok:{x}"

    routed = RoutedRunnable(router=router, task_type=lambda _: "code",
                            agents={"a": RunnableLambda(flaky), "b": RunnableLambda(flaky)})
    retrying = routed.with_retry(stop_after_attempt=2, wait_exponential_jitter=False,
                                 retry_if_exception_type=(RateLimited,))
    assert retrying.invoke("x") == "ok:x"
    rows = executions(router)
    assert [r["success"] for r in rows] == [False, False, True]
    assert rows[0]["metadata"]["task_id"] == rows[1]["metadata"]["task_id"]
    assert rows[2]["metadata"]["task_id"] != rows[0]["metadata"]["task_id"]


def test_max_attempts_says_so_on_the_first_error() -> None:
    with AgentRouter(agents=["a", "b", "c"], store="mem://", seed=0) as r:
        routed = RoutedRunnable(router=r, task_type=lambda _: "t", max_attempts=2,
                                agents={k: limited(k) for k in ("a", "b", "c")})
        with pytest.raises(RateLimited) as info:
            routed.invoke("x")
        summary = AllAgentsFailed.of(info.value)
        assert summary is not None and len(summary.errors) == 2
        assert "max_attempts=2 reached" in "\n".join(info.value.__notes__)
        assert r.store.executions.count() == 2


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_an_abstention_on_the_fallback_raises_the_first_agents_error(mode: str) -> None:
    """on_abstain: raise, a fails and the router abstains on the rest (only b, with a
    bad history): the caller used to get Abstained, and a's own error was lost."""
    policy = AbstentionPolicy(on_abstain="raise")
    with AgentRouter(["a", "b"], store="mem://", seed=0, abstention=policy) as router:
        prefer(router, "a", "code")
        routed = RoutedRunnable(router=router, task_type=lambda _: "code",
                                agents={"a": limited("a"), "b": RunnableLambda(str)})
        with pytest.raises(RateLimited) as info:
            if mode == "invoke":
                routed.invoke("x")
            elif mode == "ainvoke":
                asyncio.run(routed.ainvoke("x"))
            else:
                chunks(routed, mode, "x")
        summary = AllAgentsFailed.of(info.value)
        assert summary is not None and list(summary.errors) == ["a"]
        assert "router abstained on task type 'code'" in str(summary)
        assert [(e["agent_id"], e["success"]) for e in executions(router)[-1:]] == \
            [("a", False)]
        assert router.in_flight("a") == router.in_flight("b") == 0
        for _ in range(30):  # now a too has a bad history: the first decision abstains
            router.record(agent_id="a", task_type="code", success=False)
        before = router.store.executions.count()
        with pytest.raises(Abstained):  # no agent ran: the router's own answer stands
            routed.invoke("x")
        assert router.store.executions.count() == before

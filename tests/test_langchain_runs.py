"""What tracers see of a routed task: selection errors are the routed run's error (an
``on_chain_error`` event), and the routed run's metadata credits the agent whose output
it returned."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from langchain_helpers import executions, failing, failing_stream, prefer, tagged

from trustroute.integrations.langchain import RoutedRunnable, TaskTypeError
from trustroute.router import AgentRouter, NoAgentAvailable
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher
from trustroute.router.trust.abstention import AbstentionPolicy

MODES = ["invoke", "ainvoke", "stream", "astream"]


def call(routed: RoutedRunnable, mode: str, value: Any, collector: Any) -> Any:
    """Run ``routed`` on ``value`` through ``mode`` with ``collector`` as the callback."""
    config: Any = {"callbacks": [collector]}
    if mode == "invoke":
        return routed.invoke(value, config)
    if mode == "stream":
        return "".join(routed.stream(value, config))
    if mode == "ainvoke":
        return asyncio.run(routed.ainvoke(value, config))

    async def collect() -> str:
        return "".join([c async for c in routed.astream(value, config)])

    return asyncio.run(collect())


@pytest.mark.parametrize("mode", MODES)
def test_no_agent_available_is_the_routed_runs_error(mode: str) -> None:
    with AgentRouter(agents=[{"id": "a", "task_types": ["code"]},
                             {"id": "b", "task_types": ["code"]}], store="mem://") as r:
        routed = RoutedRunnable(router=r, agents={"a": tagged("a"), "b": tagged("b")},
                                task_type=lambda _: "poetry")
        collector = RunCollectorCallbackHandler()
        with pytest.raises(NoAgentAvailable):
            call(routed, mode, "x", collector)
        (root,) = collector.traced_runs
        assert root.name == "RoutedRunnable" and "NoAgentAvailable" in (root.error or "")


@pytest.mark.parametrize("mode", MODES)
def test_a_bad_task_type_is_the_routed_runs_error(router: AgentRouter, mode: str) -> None:
    routed = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                            task_type=lambda _: "")
    collector = RunCollectorCallbackHandler()
    with pytest.raises(TaskTypeError):
        call(routed, mode, "x", collector)
    (root,) = collector.traced_runs
    assert "TaskTypeError" in (root.error or "")
    assert router.store.executions.count() == 0


@pytest.mark.parametrize("mode", MODES)
def test_the_routed_run_credits_the_agent_that_answered(router: AgentRouter,
                                                        mode: str) -> None:
    prefer(router, "a", "code")
    a = failing("a is down") if "invoke" in mode else failing_stream("a is down")
    routed = RoutedRunnable(router=router, agents={"a": a, "b": tagged("b")},
                            task_type=lambda _: "code")
    collector = RunCollectorCallbackHandler()
    assert call(routed, mode, "x", collector) == "b:x"
    (root,) = collector.traced_runs
    meta = root.extra["metadata"]
    answered = executions(router)[-1]
    assert answered["agent_id"] == "b"
    assert (meta["agent_id"], meta["attempt"]) == ("b", 2)
    assert meta["decision_id"] == answered["decision_id"]
    assert meta["task_type"] == "code" and meta["task_id"] == answered["metadata"]["task_id"]
    (child_a,) = [run for run in root.child_runs if run.name == "a"]
    assert child_a.extra["metadata"]["agent_id"] == "a"  # each attempt keeps its own


def test_the_routed_runs_end_event_credits_the_agent_that_answered(
        router: AgentRouter) -> None:
    prefer(router, "a", "code")
    routed = RoutedRunnable(router=router, agents={"a": failing(), "b": tagged("b")},
                            task_type=lambda _: "code")

    async def events() -> list[dict[str, Any]]:
        return [e async for e in routed.astream_events("x", version="v2")]

    (end,) = [e for e in asyncio.run(events())
              if e["event"] == "on_chain_end" and e["name"] == "RoutedRunnable"]
    assert end["data"]["output"] == "b:x" and end["metadata"]["agent_id"] == "b"


def test_an_abstained_decision_is_handed_over_and_still_answered() -> None:
    """Under on_abstain: human the router hands the task to people and RoutedRunnable
    runs the chosen agent anyway; the routed run's metadata says it abstained."""
    handed: list[str] = []
    hooks = TransferDispatcher([CallableHook(lambda request: handed.append(request.task_type))])
    with AgentRouter(["a", "b"], store="mem://", seed=0, transfer=hooks,
                     abstention=AbstentionPolicy(on_abstain="human")) as router:
        for agent_id in ("a", "b"):  # both always failed: weak_resonance fires
            for _ in range(10):
                router.record(agent_id=agent_id, task_type="t", success=False)
        routed = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                                task_type=lambda _: "t")
        collector = RunCollectorCallbackHandler()
        answer = call(routed, "invoke", "x", collector)
        assert hooks.join(5) and handed == ["t"]  # a person got the task
        (root,) = collector.traced_runs
        assert answer == f"{root.extra['metadata']['agent_id']}:x"  # and an agent answered
        assert root.extra["metadata"]["abstained"] is True
        assert executions(router)[-1]["success"] is True  # its run is recorded as usual

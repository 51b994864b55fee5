"""Failure handling: fallback to the next-best agent with both outcomes recorded under
one task id, the all-failed error, mid-stream errors, and in-flight slots released on
every path (exceptions, closed streams, cancelled tasks)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_core.runnables import RunnableGenerator, RunnableLambda
from langchain_helpers import RunLog, executions, failing, prefer, run, tagged, word_stream

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.router import AgentAtCapacity, AgentRouter, CapacityTimeout, NoAgentAvailable


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_a_raising_agent_falls_back_and_both_outcomes_are_recorded(
        router: AgentRouter, mode: str) -> None:
    prefer(router, "a", "code")
    before = router.store.executions.count()
    a = failing("a is down") if mode in ("invoke", "ainvoke") else \
        RunnableGenerator(_broken_gen, _broken_agen)
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("code"),
                            agents={"a": a, "b": tagged("b") if "invoke" in mode
                                    else word_stream("b")})
    assert run(routed, mode, "x") in ("b:x", "b0 b1 b2 ")
    first, second = executions(router)[before:]
    assert (first["agent_id"], first["success"]) == ("a", False)
    assert (second["agent_id"], second["success"]) == ("b", True)
    assert first["metadata"]["task_id"] == second["metadata"]["task_id"]
    assert (first["metadata"]["attempt"], second["metadata"]["attempt"]) == (1, 2)
    assert set(first["metadata"]) == {"task_id", "attempt"}
    assert first["decision_id"] != second["decision_id"]
    assert router.in_flight("a") == router.in_flight("b") == 0


def _broken_gen(inputs: Iterator[Any]) -> Iterator[str]:
    for _ in inputs:
        pass
    raise ValueError("a is down")
    yield ""  # pragma: no cover - makes this a generator


async def _broken_agen(inputs: AsyncIterator[Any]) -> AsyncIterator[str]:
    async for _ in inputs:
        pass
    raise ValueError("a is down")
    yield ""  # pragma: no cover


class EagerlyBroken(RunnableLambda[Any, Any]):
    """An agent whose stream()/astream() raise when called, before any chunk."""

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        raise ValueError("a is down")

    def astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise ValueError("a is down")


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_stream_that_fails_as_it_is_opened_falls_back_like_invoke(
        router: AgentRouter, mode: str) -> None:
    prefer(router, "a", "code")
    before = router.store.executions.count()
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("code"),
                            agents={"a": EagerlyBroken(lambda x: x), "b": word_stream("b")})
    assert run(routed, mode, "x") == "b0 b1 b2 "
    assert [(e["agent_id"], e["success"]) for e in executions(router)[before:]] == \
        [("a", False), ("b", True)]
    assert router.in_flight("a") == router.in_flight("b") == 0


def test_the_fallback_is_a_separate_child_run(router: AgentRouter) -> None:
    prefer(router, "a", "code")
    log = RunLog()
    routed = RoutedRunnable(router=router, agents={"a": failing(), "b": tagged("b")},
                            task_type=fixed_task_type("code"))
    routed.invoke("x", {"callbacks": [log]})
    (parent,) = log.named("RoutedRunnable")
    (run_a,), (run_b,) = log.named("a"), log.named("b")
    assert run_a["parent_run_id"] == run_b["parent_run_id"] == parent["run_id"]
    assert (run_a["metadata"]["attempt"], run_b["metadata"]["attempt"]) == (1, 2)
    assert run_b["metadata"]["agent_id"] == "b"


def test_errors_outside_exceptions_to_handle_are_not_retried(router: AgentRouter) -> None:
    def interrupt(x: Any) -> Any:
        raise KeyError("not handled")

    routed = RoutedRunnable(router=router, agents={"a": RunnableLambda(interrupt),
                                                   "b": RunnableLambda(interrupt)},
                            task_type=fixed_task_type("t"), exceptions_to_handle=(ValueError,))
    with pytest.raises(KeyError):
        routed.invoke("x")
    assert router.store.executions.count() == 0  # not an outcome we judge: nothing recorded
    assert router.in_flight("a") == router.in_flight("b") == 0


def test_a_mid_stream_error_is_recorded_and_raised_without_fallback(
        router: AgentRouter) -> None:
    prefer(router, "a", "s")
    before = router.store.executions.count()

    def half(inputs: Iterator[Any]) -> Iterator[str]:
        for _ in inputs:
            pass
        yield "partial "
        raise ValueError("connection reset")

    routed = RoutedRunnable(router=router, task_type=fixed_task_type("s"),
                            agents={"a": RunnableGenerator(half), "b": word_stream("b")})
    got: list[str] = []
    with pytest.raises(ValueError, match="connection reset"):
        for chunk in routed.stream("x"):
            got.append(chunk)
    assert got == ["partial "]
    (row,) = executions(router)[before:]
    assert (row["agent_id"], row["success"]) == ("a", False)
    assert router.in_flight("a") == 0


def test_a_closed_sync_stream_releases_the_slot_and_records_nothing(
        router: AgentRouter) -> None:
    prefer(router, "a", "s")
    before = router.store.executions.count()
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("s"),
                            agents={"a": word_stream("a", 50), "b": word_stream("b")})
    stream = routed.stream("x")
    assert next(stream) == "a0 "
    assert router.in_flight("a") == 1
    stream.close()
    assert router.in_flight("a") == 0
    assert router.store.executions.count() == before


class Gate:
    """An async agent that streams one chunk, then waits until cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def agen(self, inputs: AsyncIterator[Any]) -> AsyncIterator[str]:
        async for _ in inputs:
            pass
        yield "first "
        self.started.set()
        await asyncio.sleep(3600)
        yield "never"


def test_a_cancelled_async_stream_releases_the_slot(router: AgentRouter) -> None:
    prefer(router, "a", "s")
    before = router.store.executions.count()
    gate = Gate()
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("s"),
                            agents={"a": RunnableGenerator(gate.agen), "b": word_stream("b")})

    async def main() -> tuple[int, list[str]]:
        got: list[str] = []

        async def consume() -> None:
            async for chunk in routed.astream("x"):
                got.append(chunk)

        task = asyncio.create_task(consume())
        await asyncio.wait_for(gate.started.wait(), 5)
        during = router.in_flight("a")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return during, got

    during, got = asyncio.run(main())
    assert during == 1 and got == ["first "]
    assert router.in_flight("a") == 0
    assert router.store.executions.count() == before  # outcome unknown: not recorded


def test_an_abandoned_async_stream_releases_on_aclose(router: AgentRouter) -> None:
    prefer(router, "a", "s")
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("s"),
                            agents={"a": word_stream("a", 50), "b": word_stream("b")})

    async def main() -> int:
        stream = routed.astream("x")
        assert await anext(stream) == "a0 "
        held = router.in_flight("a")
        await stream.aclose()
        return held

    assert asyncio.run(main()) == 1
    assert router.in_flight("a") == 0


@pytest.mark.parametrize("handled", [(Exception,), (BaseException,)])
def test_a_cancelled_ainvoke_releases_the_slot(router: AgentRouter,
                                               handled: tuple[type[BaseException], ...]
                                               ) -> None:
    # cancellation is never the agent's failure, even under exceptions_to_handle=BaseException
    started = threading.Event()

    async def slow(x: Any) -> str:
        started.set()
        await asyncio.sleep(3600)
        return "never"

    routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                            agents={"a": RunnableLambda(lambda x: x, afunc=slow),
                                    "b": RunnableLambda(lambda x: x, afunc=slow)},
                            exceptions_to_handle=handled)

    async def main() -> int:
        task = asyncio.create_task(routed.ainvoke("x"))
        while not started.is_set():
            await asyncio.sleep(0.001)
        held = router.in_flight("a") + router.in_flight("b")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return held

    assert asyncio.run(main()) == 1
    assert router.in_flight("a") == router.in_flight("b") == 0
    assert router.store.executions.count() == 0


def test_an_evaluator_error_releases_the_slot(router: AgentRouter) -> None:
    def broken(i: Any, o: Any) -> bool:
        raise RuntimeError("evaluator bug")

    routed = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                            task_type=fixed_task_type("t"), evaluator=broken)
    with pytest.raises(RuntimeError, match="evaluator bug"):
        routed.invoke("x")
    assert router.in_flight("a") == router.in_flight("b") == 0


def test_async_recording_does_not_block_the_event_loop(router: AgentRouter) -> None:
    """A slow store write (200 ms) happens off the loop: a heartbeat keeps ticking."""
    real = router.store.executions.record

    def slow_record(rec: Any) -> Any:
        time.sleep(0.2)
        return real(rec)

    router.store.executions.record = slow_record  # type: ignore[method-assign]
    routed = RoutedRunnable(router=router, agents={"a": tagged("a"), "b": tagged("b")},
                            task_type=fixed_task_type("t"))

    async def main() -> tuple[str, int]:
        ticks = 0
        done = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(heartbeat())
        out = await routed.ainvoke("x")
        done.set()
        await beat
        return out, ticks

    out, ticks = asyncio.run(main())
    assert out in ("a:x", "b:x")
    assert ticks >= 8  # ~20 expected; a blocked loop would manage 1
    assert router.store.executions.count() == 1


def test_full_agents_make_callers_wait_instead_of_failing() -> None:
    peak = {"now": 0, "max": 0}

    async def busy(x: str) -> str:
        peak["now"] += 1
        peak["max"] = max(peak["max"], peak["now"])
        await asyncio.sleep(0.01)
        peak["now"] -= 1
        return f"done:{x}"

    with AgentRouter(agents=[{"id": "solo", "max_concurrent": 2}], store="mem://") as r:
        routed = RoutedRunnable(router=r, task_type=fixed_task_type("t"),
                                agents={"solo": RunnableLambda(lambda x: x, afunc=busy)})
        outputs = asyncio.run(routed.abatch([str(i) for i in range(8)]))
        assert outputs == [f"done:{i}" for i in range(8)]
        assert peak["max"] == 2
        assert r.store.executions.count() == 8 and r.in_flight("solo") == 0


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_waiting_out_capacity_timeout_is_agent_at_capacity(mode: str) -> None:
    release = threading.Event()
    with AgentRouter(agents=[{"id": "solo", "max_concurrent": 1}], store="mem://") as r:
        routed = RoutedRunnable(router=r, task_type=fixed_task_type("t"), capacity_timeout=0.1,
                                agents={"solo": RunnableLambda(lambda x: release.wait(5) and x)})
        holder = threading.Thread(target=routed.invoke, args=("first",))
        holder.start()
        while r.in_flight("solo") == 0:
            time.sleep(0.001)
        try:
            with pytest.raises(AgentAtCapacity, match=r"every eligible agent \('solo'\) was "
                               r"still at capacity after waiting 0.1 s \(capacity_timeout\)"
                               ) as info:
                run(routed, mode, "second")
        finally:
            release.set()
            holder.join()
        assert isinstance(info.value, NoAgentAvailable)  # what select says of a full pool
        assert isinstance(info.value, CapacityTimeout) and info.value.agent_ids == ("solo",)
        assert r.store.executions.count() == 1 and r.in_flight("solo") == 0


def test_a_fallback_counts_as_one_contradiction_for_the_failed_agent(
        router: AgentRouter) -> None:
    """The shared {"task_id", "attempt"} convention reaches the trust layer."""
    prefer(router, "a", "code")  # "a": 10 observations, no contradiction
    routed = RoutedRunnable(router=router, agents={"a": failing(), "b": tagged("b")},
                            task_type=fixed_task_type("code"))
    assert routed.invoke("x") == "b:x"
    # 11 observations -> frequency base 0.85, minus 0.1 for the one contradiction
    assert router.trust("a", "code").frequency == pytest.approx(0.85 - 0.1)

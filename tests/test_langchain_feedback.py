"""LangChain feedback (issue 20, item 3): RoutedRunnable stores the run ids of the routed
run and of the chosen agent's run with each execution, so ``router.feedback(run_id, ...)``
teaches the router; ``evaluate="background"`` judges after the reply, as feedback with
key "evaluator", from a bounded queue that never blocks a reply."""

from __future__ import annotations

import asyncio
import logging
import random
import select
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import ConfigurableField, RunnableLambda
from langchain_helpers import RunLog, chunks, failing, prefer, tagged
from surreal_fixtures import Target, serve

from trustroute import AgentRouter
from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.profiles.store.trust import TrustRepository

PENDING = {"wait_s": 3600, "default": "ignore"}


def test_users_thumbs_on_the_run_id_passed_to_invoke_teach_the_router() -> None:
    """Two agents that never raise; users approve one 90% and the other 20%."""
    users = random.Random(11)
    rate = {"liked": 0.9, "disliked": 0.2}
    second_half = {"liked": 0, "disliked": 0}
    with AgentRouter(agents=list(rate), store="mem://", seed=5, feedback=PENDING) as router:
        routed = RoutedRunnable(router=router, task_type=fixed_task_type("chat"),
                                agents={name: tagged(name) for name in rate})
        for i in range(400):
            run_id = uuid.uuid4()
            agent = routed.invoke(f"q{i}", config={"run_id": run_id}).split(":")[0]
            router.feedback(run_id, approved=users.random() < rate[agent])  # its UUID
            if i >= 200:
                second_half[agent] += 1
        assert second_half["liked"] >= 0.85 * 200
        assert router.trust("liked", "chat").human >= 0.8
        # the disliked agent got only the few tasks that showed it is worse: its score
        # is what those few verdicts say, the cautious way (docs/trust.md)
        assert router.trust("disliked", "chat").human <= 0.3
        assert router.profile("disliked", "chat").expertise < 0.5
        assert router.profile("liked", "chat").pending == 0


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_the_routed_run_and_the_agents_child_run_are_both_refs(mode: str) -> None:
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0, feedback=PENDING) as router:
        routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                                agents={"a": tagged("a"), "b": tagged("b")})
        log, run_id = RunLog(), uuid.uuid4()
        config: Any = {"run_id": run_id, "callbacks": [log]}
        if mode == "invoke":
            routed.invoke("x", config)
        elif mode == "ainvoke":
            asyncio.run(routed.ainvoke("x", config))
        else:
            chunks(routed.with_config(config), mode, "x")
        (parent,) = log.named("RoutedRunnable")
        assert parent["run_id"] == run_id
        (child,) = [s for s in log.starts if s["parent_run_id"] == run_id]
        agent = child["name"]
        assert router.profile(agent, "t").pending == 1
        router.feedback(str(child["run_id"]), score=0.25)  # the id a tracer shows
        assert router.profile(agent, "t").avg_quality == pytest.approx(0.25)
        router.feedback(str(run_id), approved=True, key="judge")  # the routed run's id
        assert router.profile(agent, "t").avg_quality == pytest.approx(0.625)
        assert router.profile(agent, "t").executions_total == 1


def test_a_failed_attempts_child_run_is_a_ref_of_that_failure(router: AgentRouter) -> None:
    prefer(router, "a", "t")
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                            agents={"a": failing(), "b": tagged("b")})
    log = RunLog()
    assert routed.invoke("x", {"callbacks": [log]}) == "b:x"
    (failed,) = log.named("a")
    before = router.profile("a", "t")
    router.feedback(str(failed["run_id"]), approved=True, comment="it was fine after all")
    after = router.profile("a", "t")
    assert after.executions_total == before.executions_total
    assert after.avg_quality > before.avg_quality


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_routed_run_id_names_the_attempt_whose_answer_was_returned(
        router: AgentRouter, mode: str) -> None:
    prefer(router, "a", "t")
    routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                            agents={"a": failing(), "b": tagged("b")})
    run_id = uuid.uuid4()
    answer = routed.invoke("x", {"run_id": run_id}) if mode == "invoke" else \
        asyncio.run(routed.ainvoke("x", {"run_id": run_id}))
    assert answer == "b:x"
    a, b = router.profile("a", "t"), router.profile("b", "t")
    router.feedback(run_id, approved=False)  # the user disliked b's answer
    assert router.profile("a", "t") == a  # a's failure is not what the user saw
    assert router.profile("b", "t").avg_quality < b.avg_quality


class Answer(TypedDict, total=False):
    out: str


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "graph"])
def test_the_id_of_the_run_the_caller_invoked_is_a_ref(mode: str) -> None:
    """The docs' ``routed | StrOutputParser()`` (or a graph with the routed runnable as a
    node) invoked with ``config={"run_id": ...}``: that id, the root run LangSmith shows,
    used to be refused (UnknownDecision): only the routed run's id was stored."""
    with AgentRouter(agents=["a"], store="mem://", seed=0, feedback=PENDING) as router:
        routed = RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                                agents={"a": tagged("a")})
        chain: Any = routed | StrOutputParser()
        if mode == "graph":
            graph = pytest.importorskip("langgraph.graph").StateGraph(Answer)
            graph.add_node("route", lambda state: {"out": routed.invoke("x")})
            graph.set_entry_point("route")
            chain = graph.compile()
        run_id = uuid.uuid4()
        config: Any = {"run_id": run_id}
        if mode == "ainvoke":
            asyncio.run(chain.ainvoke("x", config))
        elif mode == "stream":
            assert "".join(chain.stream("x", config)) == "a:x"
        else:
            chain.invoke({} if mode == "graph" else "x", config)
        assert router.profile("a", "t").pending == 1
        router.feedback(run_id, approved=False)
        assert router.profile("a", "t").pending == 0


# -- the background evaluator -----------------------------------------------------------

class Judge:
    """An evaluator that takes ``seconds`` (or waits for ``gate``) and scores ``score``."""

    def __init__(self, score: Any = 0.25, seconds: float = 0.0,
                 gate: threading.Event | None = None) -> None:
        self.score, self.seconds, self.gate = score, seconds, gate
        self.judged: list[Any] = []

    def __call__(self, input_: Any, output: Any) -> Any:
        if self.gate is not None:
            assert self.gate.wait(30)
        time.sleep(self.seconds)
        self.judged.append(output)
        return self.score


def background(router: AgentRouter, judge: Any, **options: Any) -> RoutedRunnable:
    return RoutedRunnable(router=router, task_type=fixed_task_type("t"),
                          agents={"a": tagged("a")}, evaluator=judge,
                          evaluate="background", **options)


def test_a_slow_evaluator_does_not_delay_the_reply_and_its_verdict_reaches_the_profile(
        ) -> None:
    judge = Judge(score=0.0, seconds=1.0)
    policy = {**PENDING, "keys": {"evaluator": {"weight": 3}}}
    with AgentRouter(agents=["a"], store="mem://", feedback=policy) as router:
        routed = background(router, judge)
        run_id = uuid.uuid4()
        started = time.perf_counter()
        assert routed.invoke("x", {"run_id": run_id}) == "a:x"
        replied = time.perf_counter() - started
        assert replied < 0.5  # the evaluator alone takes 1 s
        assert router.profile("a", "t").pending == 1 and judge.judged == []
        assert routed.flush(timeout=30)
        assert judge.judged == ["a:x"]
        profile = router.profile("a", "t")
        assert profile.pending == 0 and profile.avg_quality == 0.0
        rows = router.store.repository(TrustRepository).feedback("a", "t")
        assert [row["key"] for row in rows] == ["evaluator"]
        router.feedback(str(run_id), approved=True)  # a user's thumbs up joins the judge's
        assert router.profile("a", "t").avg_quality == pytest.approx(0.25)  # (3x0 + 1) / 4
        assert routed.close() == 0


def test_configured_copies_share_one_background_queue() -> None:
    # LangChain builds a new RoutedRunnable for every call with configurable fields; each
    # used to start its own evaluator threads, which the caller could not flush or close
    judge = Judge(score=0.5)
    before = set(threading.enumerate())
    with AgentRouter(agents=["a"], store="mem://", feedback=PENDING) as router:
        routed = background(router, judge, evaluate_workers=2)
        configurable = routed.configurable_fields(
            max_attempts=ConfigurableField(id="attempts"))
        for _ in range(5):
            assert configurable.invoke("x", {"configurable": {"attempts": 1}}) == "a:x"
        workers = [t for t in set(threading.enumerate()) - before
                   if t.name.startswith("trustroute-evaluator-")]
        assert len(workers) <= 2
        assert routed.flush(timeout=30) and judge.judged == ["a:x"] * 5
        assert router.profile("a", "t").pending == 0
        assert routed.close() == 0


def test_copies_with_another_evaluator_or_router_share_the_originals_queue() -> None:
    # a configurable evaluator (A/B judges) or router (one per tenant) made each call's
    # copy start evaluator threads of its own, never stopped and out of flush's reach
    first, second = Judge(score=0.25), Judge(score=0.75)
    before = set(threading.enumerate())
    with AgentRouter(agents=["a"], store="mem://", feedback=PENDING) as router, \
            AgentRouter(agents=["a"], store="mem://", feedback=PENDING) as tenant:
        routed = background(router, first, evaluate_workers=2)
        configurable = routed.configurable_fields(
            evaluator=ConfigurableField(id="judge"), router=ConfigurableField(id="tenant"))
        for _ in range(5):
            assert configurable.invoke("x", {"configurable": {"judge": second}}) == "a:x"
            assert configurable.invoke("y", {"configurable": {"tenant": tenant}}) == "a:y"
        workers = [t for t in set(threading.enumerate()) - before
                   if t.name.startswith("trustroute-evaluator-")]
        assert len(workers) <= 2
        assert routed.flush(timeout=30)  # the copies' outputs too, each by its own judge
        assert (second.judged, first.judged) == (["a:x"] * 5, ["a:y"] * 5)
        assert router.profile("a", "t").avg_quality == pytest.approx(0.75)
        assert tenant.profile("a", "t").avg_quality == pytest.approx(0.25)  # its verdicts
        assert routed.close() == 0
        for worker in workers:
            worker.join(30)
        assert not any(worker.is_alive() for worker in workers)  # close stopped them all


def test_an_async_evaluator_runs_in_the_background_of_ainvoke() -> None:
    async def judge(input_: Any, output: Any) -> bool:
        await asyncio.sleep(0.2)
        return output == "a:good"

    with AgentRouter(agents=["a"], store="mem://", feedback=PENDING) as router:
        routed = background(router, judge)
        assert asyncio.run(routed.ainvoke("good")) == "a:good"
        assert router.profile("a", "t").pending == 1
        assert routed.flush(timeout=30)
        assert router.profile("a", "t").avg_quality == 1.0
        routed.close()


def test_the_queue_is_bounded_and_a_full_queue_never_blocks_a_reply(
        caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    judge = Judge(score=1.0, gate=gate)
    with AgentRouter(agents=["a"], store="mem://", feedback=PENDING) as router:
        routed = background(router, judge, evaluate_queue_size=2, evaluate_workers=1)
        with caplog.at_level(logging.WARNING):
            started = time.perf_counter()
            for i in range(6):
                assert routed.invoke(str(i)) == f"a:{i}"
            assert time.perf_counter() - started < 5  # never waited for the held judge
        gate.set()
        assert routed.flush(timeout=30)
        # two queued (three when the worker took the first before the next came); the
        # rest found the queue full and stay pending
        assert len(judge.judged) in (2, 3)
        assert router.profile("a", "t").pending == 6 - len(judge.judged)
        assert "the queue of 2 evaluations is full" in caplog.text
        routed.close()


def test_on_close_a_verdict_finishes_or_stays_pending() -> None:
    gate = threading.Event()
    judge = Judge(score=1.0, gate=gate)
    with AgentRouter(agents=["a"], store="mem://", feedback=PENDING) as router:
        routed = background(router, judge, evaluate_workers=1)
        for i in range(3):
            routed.invoke(str(i))
        assert routed.close(timeout=0.2) == 3  # one running, two queued: none judged yet
        assert router.profile("a", "t").pending == 3
        gate.set()  # the running one may still finish; the queued ones never start
        deadline = time.monotonic() + 10
        while not judge.judged and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        assert router.profile("a", "t").pending in (2, 3)
        assert len(judge.judged) <= 1
        assert routed.invoke("after") == "a:after"  # replies go on, unjudged
        assert router.profile("a", "t").pending in (3, 4)


def test_an_evaluator_that_raises_leaves_the_run_pending_and_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    def judge(input_: Any, output: Any) -> float:
        raise RuntimeError("judge model unavailable")

    with AgentRouter(agents=["a"], store="mem://", feedback=PENDING) as router:
        routed = background(router, judge)
        with caplog.at_level(logging.WARNING):
            assert routed.invoke("x") == "a:x"
            assert routed.flush(timeout=30)
        assert router.profile("a", "t").pending == 1
        assert "RuntimeError: judge model unavailable" in caplog.text
        assert "stays pending" in caplog.text
        routed.close()


def test_background_needs_an_evaluator(router: AgentRouter) -> None:
    with pytest.raises(ValueError, match=r"evaluate='background' .* pass evaluator="):
        RoutedRunnable(router=router, task_type=fixed_task_type("t"), evaluate="background",
                       agents={"a": RunnableLambda(str), "b": RunnableLambda(str)})


# -- a thumbs endpoint in another process (docs/feedback.md) ----------------------------

@pytest.fixture(name="surreal")
def surreal_fixture() -> Iterator[Target]:
    yield from serve(serialized=False)


@pytest.mark.slow
def test_a_thumbs_endpoint_in_another_worker_teaches_the_app(surreal: Target) -> None:
    web = subprocess.Popen([sys.executable, str(Path(__file__).with_name("thumbs_server.py")),
                            surreal.url, surreal.database], env=surreal.env(),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        assert web.stdout is not None
        ready, _, _ = select.select([web.stdout], [], [], 60)
        port = int(web.stdout.readline()) if ready else pytest.fail("no port")
        with AgentRouter(agents=["a", "b"], store=surreal.url, seed=0, feedback=PENDING,
                         store_options=surreal.options(sync_delay_s=0.5)) as router:
            routed = RoutedRunnable(router=router, task_type=fixed_task_type("chat"),
                                    agents={"a": tagged("a"), "b": tagged("b")})
            run_id = uuid.uuid4()
            agent = routed.invoke("hello", {"run_id": run_id}).split(":")[0]
            assert router.profile(agent, "chat").pending == 1
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                assert http.post(f"/runs/{run_id}/feedback",
                                 json={"approved": False}).status_code == 204
                unknown = http.post(f"/runs/{uuid.uuid4()}/feedback", json={"approved": True})
                assert unknown.status_code == 404
                bad = http.post(f"/runs/{run_id}/feedback", json={"approved": "yes"})
                assert bad.status_code == 422 and "approved" in bad.text
            deadline = time.monotonic() + 0.5 + 5  # sync_delay_s, and a loaded machine
            while router.profile(agent, "chat").pending and time.monotonic() < deadline:
                time.sleep(0.02)
            profile = router.profile(agent, "chat")
            assert (profile.pending, profile.avg_quality) == (0, 0.0)
    finally:
        web.communicate("", timeout=30)

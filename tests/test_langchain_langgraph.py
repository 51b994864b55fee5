"""A routed agent inside a LangGraph graph: its ``interrupt()`` pauses the graph, as it
would without routing, instead of counting as the agent's failure, and the resume goes
back to it; its ``Command`` for the parent graph is a recorded success."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableLambda
from langchain_helpers import executions, prefer

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.integrations.langchain.resume import PausedTasks, graph_task_key
from trustroute.router import AgentRouter

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt


class State(TypedDict, total=False):
    question: str
    answer: str


def asking(name: str) -> RunnableLambda[Any, str]:
    """An agent that asks a person to approve before it answers."""
    def answer(question: str) -> str:
        approved = interrupt({"agent": name, "question": question})
        return f"{name}: {question} ({approved})"

    async def aanswer(question: str) -> str:
        return answer(question)

    return RunnableLambda(answer, afunc=aanswer, name=name)


def one_node(state: type, node: Any) -> Any:
    """A graph of the one ``node``, with a checkpointer (so that it can pause)."""
    graph = StateGraph(state)
    graph.add_node("n", node)
    graph.add_edge(START, "n")
    graph.add_edge("n", END)
    return graph.compile(checkpointer=InMemorySaver())


def runner(app: Any, asynchronous: bool) -> Any:
    """Run ``app`` on thread t-1, through ``ainvoke`` or ``invoke``."""
    thread = {"configurable": {"thread_id": "t-1"}}

    def run(value: Any) -> Any:
        if asynchronous:
            return asyncio.run(app.ainvoke(value, thread))
        return app.invoke(value, thread)

    return run


def graph_of(routed: RoutedRunnable, asynchronous: bool) -> Any:
    def respond(state: State) -> State:
        return {"answer": routed.invoke(state["question"])}

    async def arespond(state: State) -> State:
        return {"answer": await routed.ainvoke(state["question"])}

    return one_node(State, arespond if asynchronous else respond)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_interrupt_pauses_the_graph_and_is_no_failure(asynchronous: bool) -> None:
    with AgentRouter(["a", "b"], store="mem://", seed=0) as router:
        routed = RoutedRunnable(router=router, agents={"a": asking("a"), "b": asking("b")},
                                task_type=fixed_task_type("support"))
        run = runner(graph_of(routed, asynchronous), asynchronous)
        paused = run({"question": "refund?"})
        (pause,) = paused["__interrupt__"]
        assert pause.value["question"] == "refund?"  # one agent asked; none fell back
        assert router.store.executions.count() == 0  # asking is not failing
        assert all(p.executions_total == 0 for p in router.profiles())
        done = run(Command(resume="approved"))
        assert done["answer"].endswith(": refund? (approved)")
        (profile,) = [p for p in router.profiles() if p.executions_total]
        assert (profile.executions_total, profile.executions_successful) == (1, 1)
        assert done["answer"].startswith(profile.agent_id)


class Task(TypedDict, total=False):
    kind: str
    out: str
    after: str


def handing_back(name: str) -> Any:
    """An agent subgraph whose last step hands control back to the parent graph."""
    def work(state: Task) -> Command[Any]:
        return Command(graph=Command.PARENT, goto="done", update={"out": f"{name} did it"})

    graph = StateGraph(Task)
    graph.add_node("work", work)
    graph.add_edge(START, "work")
    return graph.compile()


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("judged", [False, True])
def test_a_command_for_the_parent_graph_is_a_recorded_success(asynchronous: bool,
                                                              judged: bool) -> None:
    seen: list[Any] = []

    def judge(task: Any, command: Any) -> float:
        seen.append(command)
        return 0.8

    with AgentRouter(["a", "b"], store="mem://", seed=0) as router:
        routed = RoutedRunnable(router=router, task_type="kind",
                                agents={"a": handing_back("a"), "b": handing_back("b")},
                                evaluator=judge if judged else None)
        graph = StateGraph(Task)
        graph.add_node("route", routed, destinations=("done",))
        graph.add_node("done", lambda state: {"after": "done ran"})
        graph.add_edge(START, "route")
        graph.add_edge("done", END)
        app = graph.compile()
        value = {"kind": "triage"}
        final = asyncio.run(app.ainvoke(value)) if asynchronous else app.invoke(value)
        assert final["after"] == "done ran"  # LangGraph proceeded as without routing
        (record,) = router.store.executions.iter_executions()
        assert final["out"] == f"{record['agent_id']} did it"
        assert (record["success"], record["quality"]) == (True, 0.8 if judged else 1.0)
        assert [c.update for c in seen] == ([{"out": final["out"]}] if judged else [])


def resumed_answers(seed: int, asynchronous: bool = False, hold: bool = False
                    ) -> tuple[str, str]:
    """(the agent that asked, the resumed answer) of one paused task on a cold router;
    ``hold``: the asking agent is busy elsewhere when the graph resumes."""
    agents = [{"id": name, "max_concurrent": 1} for name in ("a", "b")]
    with AgentRouter(agents, store="mem://", seed=seed) as router:
        routed = RoutedRunnable(router=router, agents={"a": asking("a"), "b": asking("b")},
                                task_type=fixed_task_type("support"))
        app = graph_of(routed, asynchronous)
        thread = {"configurable": {"thread_id": f"t-{seed}"}}
        paused = (asyncio.run(app.ainvoke({"question": "q"}, thread)) if asynchronous
                  else app.invoke({"question": "q"}, thread))
        asked = paused["__interrupt__"][0].value["agent"]
        lease = router.acquire(asked) if hold else None
        resume = Command(resume="ok")
        done = asyncio.run(app.ainvoke(resume, thread)) if asynchronous else \
            app.invoke(resume, thread)
        if lease is not None:
            lease.release()
        return asked, done["answer"]


def test_a_resumed_task_goes_back_to_the_agent_that_asked() -> None:
    """Cold routers (nothing recorded while paused) used to pick anew: another agent
    answered the person about half the time. A busy asking agent is not waited for."""
    for seed in range(24):
        asked, answer = resumed_answers(seed, asynchronous=seed % 3 == 0)
        assert answer == f"{asked}: q (ok)", seed
    for seed in range(4):
        asked, answer = resumed_answers(seed, hold=True)
        assert answer.endswith(": q (ok)") and not answer.startswith(asked)


def test_paused_tasks_are_bounded_and_forgotten() -> None:
    paused = PausedTasks(size=2)
    keys = [graph_task_key({"configurable": {"thread_id": t, "checkpoint_ns": "n:1"}}, "s")
            for t in ("t1", "t2", "t3")]
    assert graph_task_key({"configurable": {"thread_id": "t1"}}) is None  # not a graph task
    for key, agent in zip(keys, "abc", strict=True):
        paused.remember(key, agent)
    assert len(paused) == 2 and paused.recall(keys[0]) is None  # the oldest went first
    assert paused.recall(keys[2]) == "c"
    paused.forget(keys[2])
    assert paused.recall(keys[2]) is None


class Retry(TypedDict, total=False):
    kind: str
    error: Any
    out: str


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_fallback_that_asks_resumes_as_the_same_attempt_of_the_same_task(
        asynchronous: bool) -> None:
    """b fails, a (the fallback) asks a person about b's error. The resume used to be a
    new task: attempt 1 under a new task id (b's failure never linked to a's rescue, no
    contradiction) without the error in a's input, so a took another path and the
    person's answer was dropped."""
    inputs: list[list[str]] = []

    def a(state: Retry) -> Retry:
        inputs.append(sorted(state))
        if state.get("error") is None:
            return {"out": "a answered without asking"}
        return {"out": "a: " + interrupt(f"b failed with {state['error']}; retry slowly?")}

    def b(state: Retry) -> Retry:
        raise ValueError("b broke")

    with AgentRouter(["a", "b"], store="mem://", seed=0) as router:
        prefer(router, "b", "t")  # b is tried first
        routed = RoutedRunnable(router=router, task_type="kind", exception_key="error",
                                agents={"a": RunnableLambda(a), "b": RunnableLambda(b)})
        run = runner(one_node(Retry, routed), asynchronous)
        assert "b broke" in run({"kind": "t"})["__interrupt__"][0].value
        assert run(Command(resume="yes"))["out"] == "a: yes"
        assert inputs == [["error", "kind"], ["error", "kind"]]  # the same input again
        tasks = [(e["agent_id"], e["success"], e["metadata"]["attempt"],
                  e["metadata"]["task_id"]) for e in executions(router) if e["metadata"]]
        assert [t[:3] for t in tasks] == [("b", False, 1), ("a", True, 2)]
        assert tasks[0][3] == tasks[1][3]  # one task
        assert router.trust_layer.book.counts("b", "t").contradictions == 1


@pytest.mark.parametrize("asynchronous", [False, True])
def test_two_routed_calls_in_one_node_each_resume_as_themselves(asynchronous: bool) -> None:
    """The node's first routed call completes, its second one's agent asks a person.
    Both used to share one paused-task entry: on resume the first call took it (steered
    to the asking agent), so the second decided anew and the answer went to b."""
    calls: list[tuple[str, str]] = []

    def agent(name: str) -> RunnableLambda[Any, str]:
        def work(x: dict[str, str]) -> str:
            calls.append((x["step"], name))
            if x["step"] == "ask":
                return f"{name} got {interrupt(name)!r}"
            return f"{name} summary"

        async def awork(x: dict[str, str]) -> str:
            return work(x)

        return RunnableLambda(work, afunc=awork)

    with AgentRouter(["a", "b"], store="mem://", seed=0) as router:
        prefer(router, "a", "t")  # both calls go to a on the first run
        routed = RoutedRunnable(router=router, task_type="kind",
                                agents={"a": agent("a"), "b": agent("b")})

        def node(state: Task) -> Task:
            first = routed.invoke({"kind": "t", "step": "summarize"})
            return {"out": first + " | " + routed.invoke({"kind": "t", "step": "ask"})}

        async def anode(state: Task) -> Task:
            first = await routed.ainvoke({"kind": "t", "step": "summarize"})
            return {"out": first + " | " + await routed.ainvoke({"kind": "t", "step": "ask"})}

        run = runner(one_node(Task, anode if asynchronous else node), asynchronous)
        assert run({"kind": "t"})["__interrupt__"][0].value == "a"
        assert calls == [("summarize", "a"), ("ask", "a")]
        prefer(router, "b", "t", n=40)  # meanwhile b became the better agent
        calls.clear()
        assert run(Command(resume="yes"))["out"] == "b summary | a got 'yes'"
        assert calls == [("summarize", "b"), ("ask", "a")]  # decided, resumed


class Draft(TypedDict, total=False):
    question: str
    draft: str
    answer: str


@pytest.mark.parametrize("mode", ["stream", "astream", "values"])
def test_a_streamed_graph_agent_is_judged_on_its_final_state(mode: str) -> None:
    """A graph streams updates ({node: update}), which do not add up: the evaluator used
    to get the last update, not the state invoke returns, and raised after the caller
    had every chunk (nothing recorded)."""
    graph = StateGraph(Draft)
    graph.add_node("draft", lambda state: {"draft": "2+2=4"})
    graph.add_node("answer", lambda state: {"answer": state["draft"][-1]})
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "answer")
    graph.add_edge("answer", END)
    agent = graph.compile()
    judged: list[Any] = []

    def judge(task: Any, state: Any) -> float:  # written against invoke's output
        judged.append(state)
        return 1.0 if state["answer"] == "4" else 0.0

    with AgentRouter(["a"], store="mem://", seed=0) as router:
        routed = RoutedRunnable(router=router, agents={"a": agent}, evaluator=judge,
                                task_type=fixed_task_type("math"))
        value: Draft = {"question": "2+2?"}
        options = {"stream_mode": "values"} if mode == "values" else {}
        if mode == "astream":
            async def collect() -> list[Any]:
                return [c async for c in routed.astream(value)]
            got = asyncio.run(collect())
        else:
            got = list(routed.stream(value, **options))
        assert got == list(agent.stream(value, **options))  # the caller's chunks as they were
        assert judged == [agent.invoke(value)]
        (record,) = executions(router)
        assert (record["success"], record["quality"]) == (True, 1.0)

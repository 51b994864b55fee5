"""LangChain quickstart: route questions between two agents and learn from every run.

Runs offline: both agents are LCEL chains over LangChain's fake chat models, which
replay canned answers and report token usage (priced per agent, so costs are recorded).
``coder`` writes good code and terse prose; ``writer`` writes good prose, weak code, and
is rate-limited on every fifth call (its chain raises), so the router falls back to
``coder`` for that task. An evaluator scores each answer; with
real models it would be tests or an LLM judge. After 40 questions the learned profiles
show who is trusted with what.

    .venv/bin/python examples/langchain_quickstart.py
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableBranch, RunnableLambda
from rich import box
from rich.console import Console
from rich.table import Table

from trustroute import AgentRouter
from trustroute.integrations.langchain import RoutedRunnable

PROMPT = ChatPromptTemplate.from_messages([("human", "{question}")])

CODER_CODE = ["def add(a, b):\n    return a + b  # tests pass"]
CODER_PROSE = ["Fine.", "It works."]
WRITER_CODE = ["Code is best written by someone else.", "add(a, b) maybe?"]
WRITER_PROSE = ["Routing sends each question to the agent most likely to answer it well, "
                "and learns from every answer it sees."]


def replay(answers: list[str]) -> GenericFakeChatModel:
    """A fake chat model that replays ``answers`` in turn, reporting token usage."""
    def messages() -> Iterator[AIMessage]:
        for text in itertools.cycle(answers):
            out = 2 * len(text.split())
            yield AIMessage(content=text, usage_metadata={
                "input_tokens": 40, "output_tokens": out, "total_tokens": 40 + out})

    return GenericFakeChatModel(messages=messages())


def agent(code_answers: list[str], prose_answers: list[str]) -> Runnable[Any, Any]:
    """An agent: one fake chat model per kind of question, behind one prompt."""
    return RunnableBranch(
        (lambda x: x["kind"] == "code", PROMPT | replay(code_answers)),
        PROMPT | replay(prose_answers),
    )


def rate_limited(every: int) -> Runnable[Any, Any]:
    """A pass-through step that raises on every ``every``-th call."""
    calls = itertools.count(1)

    def gate(x: Any) -> Any:
        if next(calls) % every == 0:
            raise RuntimeError("429 rate limited")
        return x

    return RunnableLambda(gate)


def judge(question: dict[str, str], answer: Any) -> float:
    """Quality in [0, 1]: code must pass its tests, prose should say something."""
    text = str(answer.content)
    if question["kind"] == "code":
        return 1.0 if "tests pass" in text else 0.1
    return min(1.0, len(text.split()) / 12)


class AgentNames(BaseCallbackHandler):
    """Notes which agent ran each task (the routed agent is a child run named by id)."""

    def __init__(self, agent_ids: set[str]) -> None:
        self.agent_ids = agent_ids
        self.ran: list[str] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        if kwargs.get("name") in self.agent_ids:
            self.ran.append(kwargs["name"])


def profile_table(router: AgentRouter) -> Table:
    table = Table(title="learned profiles", box=box.SIMPLE_HEAD)  # fits 80 columns
    for header in ("task type", "agent", "runs", "success", "expertise", "conf.",
                   "adjusted", "cost $"):
        table.add_column(header, justify="left" if header in ("task type", "agent") else "right")
    for p in router.profiles():
        table.add_row(p.task_type, p.agent_id, str(p.executions_total), f"{p.success_rate:.0%}",
                      f"{p.expertise:.2f}", f"{p.confidence:.2f}", f"{p.adjusted_score:.3f}",
                      "—" if p.avg_cost is None else f"{p.avg_cost:.4f}")
    return table


def main() -> None:
    console = Console()
    agents = [
        {"id": "coder", "price_per_1k_input_tokens": 0.15, "price_per_1k_output_tokens": 0.6},
        {"id": "writer", "price_per_1k_input_tokens": 0.5, "price_per_1k_output_tokens": 1.5},
    ]
    with AgentRouter(agents=agents, store="mem://", seed=2) as router:
        routed = RoutedRunnable(
            router=router,
            agents={"coder": agent(CODER_CODE, CODER_PROSE),
                    "writer": rate_limited(5) | agent(WRITER_CODE, WRITER_PROSE)},
            task_type="kind",  # the task type is the "kind" key of each input
            evaluator=judge,
        )
        chain = routed | StrOutputParser()  # a routed runnable composes like any other

        names = AgentNames({"coder", "writer"})
        questions = [{"kind": kind, "question": f"{kind} question {i}"}
                     for i, kind in zip(range(40), itertools.cycle(["code", "prose"]))]
        for i, question in enumerate(questions, start=1):
            before = len(names.ran)
            answer = chain.invoke(question, {"callbacks": [names]})
            ran = names.ran[before:]
            if i <= 6 or i % 10 == 0 or len(ran) > 1:
                path = " -> ".join(ran) + ("  (fell back)" if len(ran) > 1 else "")
                console.print(f"#{i:<3} {question['kind']:<6} {path:<28} "
                              f"{answer.splitlines()[0][:36]!r}", highlight=False)

        console.print(profile_table(router))
        for kind in ("code", "prose"):
            decision = router.select(kind)
            console.print(f"next {kind} question goes to [bold]{decision.agent_id}[/bold]: "
                          f"{decision.chosen.reason}")
        console.print(f"executions recorded: {router.store.executions.count()} "
                      f"for {len(questions)} questions (a fallback records both attempts)")


if __name__ == "__main__":
    main()

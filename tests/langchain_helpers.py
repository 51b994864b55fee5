"""Shared pieces of the LangChain integration tests: real LangChain objects only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableGenerator, RunnableLambda

from trustroute.router import AgentRouter


def tagged(agent_id: str) -> RunnableLambda:
    """An agent whose output names it: ``"<id>:<input>"``."""
    return RunnableLambda(lambda x: f"{agent_id}:{x}", name=f"tagged_{agent_id}")


def failing(message: str = "boom") -> RunnableLambda:
    """An agent that always raises ValueError(message)."""

    def fail(x: Any) -> Any:
        raise ValueError(message)

    return RunnableLambda(fail)


def failing_stream(message: str = "boom") -> RunnableGenerator:
    """A streaming agent (sync and async) that raises ValueError(message) before any chunk."""

    def gen(inputs: Iterator[Any]) -> Iterator[str]:
        for _ in inputs:
            pass
        raise ValueError(message)
        yield ""  # pragma: no cover - makes this a generator

    async def agen(inputs: AsyncIterator[Any]) -> AsyncIterator[str]:
        async for _ in inputs:
            pass
        raise ValueError(message)
        yield ""  # pragma: no cover

    return RunnableGenerator(gen, agen)


def chat(text: str, *, usage: tuple[int, int] | None = None,
         repeat: int = 20) -> GenericFakeChatModel:
    """A fake chat model answering ``text`` (streamed word by word) ``repeat`` times."""
    meta = None if usage is None else {"input_tokens": usage[0], "output_tokens": usage[1],
                                       "total_tokens": usage[0] + usage[1]}
    return GenericFakeChatModel(
        messages=iter([AIMessage(content=text, usage_metadata=meta) for _ in range(repeat)]))


def prefer(router: AgentRouter, best: str, task_type: str, n: int = 10) -> None:
    """Teach ``router`` that ``best`` succeeds on ``task_type`` and the others fail."""
    for agent_id in router.agents:
        for _ in range(n):
            router.record(agent_id=agent_id, task_type=task_type, success=agent_id == best)


def executions(router: AgentRouter) -> list[dict[str, Any]]:
    """Stored executions, oldest first."""
    return list(router.store.executions.iter_executions())


class RunLog(BaseCallbackHandler):
    """Records every chain start: name, run id, parent run id, tags, metadata."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[dict[str, Any]] = []

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, tags: list[str] | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.starts.append({"name": kwargs.get("name"), "run_id": run_id,
                            "parent_run_id": parent_run_id, "tags": tags or [],
                            "metadata": dict(metadata or {})})

    def named(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.starts if s["name"] == name]


def chunks(routed: Runnable[Any, Any], mode: str, value: Any) -> list[Any]:
    """The chunks of ``routed.stream(value)`` (mode "stream") or of ``astream``."""
    if mode == "stream":
        return list(routed.stream(value))

    async def collect() -> list[Any]:
        return [c async for c in routed.astream(value)]

    return asyncio.run(collect())


def run(routed: Runnable[Any, Any], mode: str, value: Any) -> Any:
    """Call ``routed`` through one execution path and return the (joined) output."""
    if mode in ("stream", "astream"):
        return "".join(chunks(routed, mode, value))
    if mode == "invoke":
        return routed.invoke(value)
    if mode == "batch":
        return routed.batch([value])[0]
    if mode == "ainvoke":
        return asyncio.run(routed.ainvoke(value))
    if mode == "abatch":
        return asyncio.run(routed.abatch([value]))[0]
    if mode == "astream_events":
        async def final() -> Any:
            out = None
            async for event in routed.astream_events(value, version="v2"):
                if event["event"] == "on_chain_end" and not event["parent_ids"]:
                    out = event["data"]["output"]
            return out
        return asyncio.run(final())
    raise AssertionError(mode)


def word_stream(agent_id: str, words: int = 3) -> RunnableGenerator:
    """A streaming agent: yields ``words`` chunks ``"<id>0 "``, ``"<id>1 "``..."""

    def gen(inputs: Iterator[Any]) -> Iterator[str]:
        for _ in inputs:
            pass
        for i in range(words):
            yield f"{agent_id}{i} "

    async def agen(inputs: AsyncIterator[Any]) -> AsyncIterator[str]:
        async for _ in inputs:
            pass
        for i in range(words):
            yield f"{agent_id}{i} "

    return RunnableGenerator(gen, agen)

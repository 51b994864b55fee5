"""LangChain integration overhead and trace-scoring budget, each beside a reference
measured in the same run.

1. ``RoutedRunnable.invoke`` over a trivial runnable vs LangChain's own
   ``RouterRunnable.invoke`` over the same runnable vs calling the runnable directly.
   The routed call does strictly more (a child run, select, a store write), so the
   figure to read is its overhead per call, with the select+record share shown apart.
2. ``evaluate_value`` per trace: without an embedder (budget 1 ms) and with LangChain's
   ``DeterministicFakeEmbedding`` against a full 1,000-vector novelty cache (budget
   100 ms).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.router import RouterRunnable

from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.router import AgentRouter
from trustroute.router.trace import NoveltyCache, ReasoningTrace, evaluate_value

CALLS = 1000
ASYNC_CALLS = 500
TRACES = 2000
EMBEDDED_TRACES = 300


def _time(fn: Callable[[], Any], n: int) -> list[float]:
    for _ in range(min(200, n)):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _interleaved(fns: list[Callable[[], Any]], n: int) -> list[list[float]]:
    """Time each function once per round, so load and store size drift hit all alike."""
    for fn in fns:
        for _ in range(min(100, n)):
            fn()
    out: list[list[float]] = [[] for _ in fns]
    gc.disable()  # as timeit does: one call's garbage must not be collected on another's clock
    try:
        for i in range(n):
            for fn, samples in zip(fns, out, strict=True):
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
            if i % 50 == 49:
                gc.collect()
    finally:
        gc.enable()
    return out


async def _atime(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    for _ in range(min(50, n)):
        await fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t0)
    return out


def _p(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] if q < 100 \
        else max(samples)


def _row(label: str, samples: list[float], unit: float = 1e6, suffix: str = "us") -> float:
    p50, p99 = statistics.median(samples) * unit, _p(samples, 99) * unit
    print(f"  {label:<46} p50 {p50:9.1f} {suffix}   p99 {p99:9.1f} {suffix}")
    return p50


def _overhead() -> None:
    agent = RunnableLambda(lambda x: x)
    reference = RouterRunnable(runnables={"a": agent, "b": agent})
    with AgentRouter(agents=["a", "b"], store="mem://", seed=0) as router:
        routed = RoutedRunnable(router=router, agents={"a": agent, "b": agent},
                                task_type=fixed_task_type("t"))
        def bookkeeping() -> None:
            router.record(router.select("t", acquire=True), success=True, latency_ms=1.0)

        print(f"invoke over a trivial RunnableLambda ({CALLS} interleaved rounds, mem:// store):")
        # each light call follows a store write, so both see the same after-effects
        samples = _interleaved([lambda: routed.invoke(1), lambda: agent.invoke(1),
                                bookkeeping, lambda: reference.invoke({"key": "a", "input": 1})],
                               CALLS)
        bare = _row("runnable.invoke (no wrapper)", samples[1])
        ref = _row("RouterRunnable.invoke (LangChain reference)", samples[3])
        ours = _row("RoutedRunnable.invoke", samples[0])
        books = _row("  of which select + record (no LangChain)", samples[2])
        print(f"  overhead over the bare runnable: RouterRunnable {ref - bare:.1f} us, "
              f"RoutedRunnable {ours - bare:.1f} us, of which {books:.1f} us select + store "
              f"write and {ours - bare - books:.1f} us LangChain runs and outcome capture")

        async def run_async() -> tuple[float, float]:
            print(f"ainvoke ({ASYNC_CALLS} calls each; the store write runs in a worker thread):")
            r = _row("RouterRunnable.ainvoke", await _atime(
                lambda: reference.ainvoke({"key": "a", "input": 1}), ASYNC_CALLS))
            o = _row("RoutedRunnable.ainvoke", await _atime(lambda: routed.ainvoke(1),
                                                            ASYNC_CALLS))
            return r, o

        asyncio.run(run_async())
        print(f"  executions stored: {router.store.executions.count()}")


def _trace(i: int) -> ReasoningTrace:
    steps = [{"type": "thought", "content": f"plan step {i}"},
             {"type": "tool_call", "tool": "search", "content": f"search({i})"},
             {"type": "observation", "content": f"found {i} results"},
             {"type": "error", "content": "timeout"},
             {"type": "tool_call", "tool": "calc", "content": f"calc({i})"},
             {"type": "observation", "content": str(i * 2)},
             {"type": "thought", "content": f"answer is {i * 2}"}]
    return ReasoningTrace(objective=f"task {i}", steps=steps,
                          outcome={"success": True, "confidence": 0.9},
                          metadata={"task_domain": "code"})


def _trace_budget() -> None:
    traces = [_trace(i) for i in range(TRACES)]
    it = iter(range(10**9))
    print(f"evaluate_value per trace (7 steps, {TRACES} traces):")
    plain = _row("no embedder (budget 1 ms = 1000 us)",
                 _time(lambda: evaluate_value(traces[next(it) % TRACES]), TRACES))
    embedder = DeterministicFakeEmbedding(size=384)
    cache = NoveltyCache()
    for i in range(1000):
        cache.add(embedder.embed_query(f"warm {i}"))
    emb = _row("DeterministicFakeEmbedding(384), cache full (budget 100 ms)",
               _time(lambda: evaluate_value(traces[next(it) % TRACES], embedder=embedder,
                                            cache=cache), EMBEDDED_TRACES),
               unit=1e3, suffix="ms")
    raw = _row("  reference: embed_query alone", _time(
        lambda: embedder.embed_query(f"trace {next(it)}"), EMBEDDED_TRACES), unit=1e3,
        suffix="ms")
    print(f"  budgets: no embedder {plain / 1000:.3f} ms <= 1 ms "
          f"[{'ok' if plain <= 1000 else 'OVER'}]; with embedder {emb:.2f} ms <= 100 ms "
          f"[{'ok' if emb <= 100 else 'OVER'}]; scoring beyond the embedding "
          f"{max(0.0, emb - raw):.2f} ms; cache holds {len(cache)} vectors")


def main() -> None:
    """Print both measurements."""
    _overhead()
    _trace_budget()


if __name__ == "__main__":
    main()

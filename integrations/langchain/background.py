"""``evaluate="background"``: a RoutedRunnable's evaluator judges outputs after the
reply, and each verdict reaches the router as feedback with key ``"evaluator"``.

The reply never waits: the recorded execution and its output are put on a bounded queue
(``put_nowait``) and worker threads run the evaluator (an async one on the worker's own
event loop), then call ``router.feedback(record_id, approved=... | score=...,
key="evaluator")``. A verdict is a bool (``approved``) or a number (``score``, within the
key's scale of the router's feedback policy). The feedback id is derived from the
record id, so a verdict sent twice counts once.

Each job carries the router and evaluator of the runnable that recorded it, so the
copies LangChain builds of a RoutedRunnable for configurable fields (another
``evaluator`` or ``router`` per call) queue on their original's queue and are judged by
its workers: one bounded set of threads, flushed and closed with the original.

When the queue is full, or after ``close``, the execution is not judged: it stays
pending until a verdict from elsewhere or the policy's ``default`` settles it (a
rate-limited WARNING says so). An evaluator that raises or returns anything else, or
feedback that cannot be stored, is logged the same way; nothing is half-written, since
a verdict is one appended row.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import queue
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from trustroute.integrations.langchain.failures import RateLimit, describe
from trustroute.router.drain import drained
from trustroute.router.feedback import EVALUATOR_KEY
from trustroute.router.router import AgentRouter

log = logging.getLogger(__name__)

_FEEDBACK_IDS = uuid.UUID("3b0e6a52-4f1d-5c8e-b7a9-2d6c1e8f0a47")  # namespace of their ids


@dataclass(frozen=True, slots=True)
class Job:
    """One output to judge: the execution's record id, the task input and the output,
    the evaluator that judges it and the router its verdict goes to."""

    record_id: str
    input: Any
    output: Any
    evaluator: Callable[[Any, Any], Any]
    router: AgentRouter


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


class BackgroundEvaluations:
    """Judges outputs off the request path: a bounded queue drained by worker threads,
    started on the first job."""

    def __init__(self, *, max_queue: int, workers: int, log_interval_s: float) -> None:
        self.workers = workers
        self.max_queue = max_queue
        # unbounded itself, so close() can always post its stop marks; submit bounds it
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._limit = RateLimit(log_interval_s)

    def submit(self, job: Job) -> bool:
        """Queue ``job`` without waiting; False (logged) when it cannot be: the queue is
        full or closed, and the execution stays pending."""
        with self._lock:
            if self._closed:
                why = "the background evaluations were closed"
            elif self._queue.qsize() >= self.max_queue:
                why = f"the queue of {self.max_queue} evaluations is full"
            else:
                self._start()
                self._queue.put_nowait(job)
                return True
        self._warn(("skipped",), f"{why}: execution {job.record_id!r} is not judged and "
                   "stays pending until other feedback or the policy's default settles it")
        return False

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued evaluation is done (at most ``timeout`` seconds);
        True when none is left."""
        return drained(self._queue, timeout)

    def close(self, timeout: float | None = 10.0) -> int:
        """Stop taking jobs, give the queued ones ``timeout`` seconds to finish, stop the
        workers; returns how many were not judged (they stay pending). An evaluation
        still running past the timeout either stores its verdict or nothing."""
        with self._lock:
            self._closed = True
        self.flush(timeout)
        left = 0
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                left += 1
            self._queue.task_done()
        running = self._queue.unfinished_tasks
        for _ in self._threads:
            self._queue.put_nowait(None)  # each worker stops after its current job
        return left + running

    def _start(self) -> None:
        """Start the workers on first use (callers hold ``_lock``)."""
        while len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"trustroute-evaluator-{len(self._threads)}")
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        with asyncio.Runner() as runner:
            while (job := self._queue.get()) is not None:
                try:
                    self._judge(job, runner)
                finally:
                    self._queue.task_done()
            self._queue.task_done()

    def _judge(self, job: Job, runner: asyncio.Runner) -> None:
        try:
            verdict = job.evaluator(job.input, job.output)
            if inspect.isawaitable(verdict):
                verdict = runner.run(_awaited(verdict))
            job.router.feedback(job.record_id, key=EVALUATOR_KEY,
                                 feedback_id=str(uuid.uuid5(_FEEDBACK_IDS, job.record_id)),
                                 **_verdict(verdict))
        except Exception as exc:  # logged: a background failure has no caller to reach
            log.debug("background evaluation of %r failed", job.record_id, exc_info=exc)
            self._warn(("failed", type(exc).__qualname__),
                       f"evaluating execution {job.record_id!r} in the background failed "
                       f"({describe(exc)}); it stays pending until other feedback or the "
                       "policy's default settles it")

    def _warn(self, kind: tuple[str, ...], message: str) -> None:
        held = self._limit.held_back(kind)
        if held is not None:
            more = f" ({held} more like it since the last warning)" if held else ""
            log.warning("%s%s", message, more)


def _verdict(value: Any) -> dict[str, Any]:
    """``approved=`` for a bool, ``score=`` for a finite number."""
    if isinstance(value, bool):
        return {"approved": value}
    if isinstance(value, int | float) and math.isfinite(value):
        return {"score": float(value)}
    raise ValueError(f"evaluator must return a bool or a number, got {value!r}")

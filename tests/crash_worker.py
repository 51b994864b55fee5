"""A worker process for tests/test_crash_log.py: records into an embedded store until it is
killed, appending what each call acknowledged to a file.

    python crash_worker.py record URL ACKS PREFIX SEED
    python crash_worker.py many URL ACKS PREFIX SEED

``record`` records one execution per call and interleaves ``signal`` and ``review``;
``many`` records batches with ``record_many``. After a call returns, one line per
acknowledged item is appended to ACKS and flushed (the kernel keeps it when the process
is killed): ``x ID`` for an execution, ``s AGENT TASK NAME`` for a signal,
``r AGENT TASK 1|0`` for a review. Execution ids are ``PREFIX-N``.
"""

from __future__ import annotations

import random
import sys
import threading
from typing import TextIO

from trustroute.profiles.records import ExecutionRecord
from trustroute.router import AgentRouter

AGENTS = ("a", "b", "c")
TASKS = ("code", "math")
SIGNALS = ("user_accepted", "user_corrected")
LIMIT = 200_000  # a safety stop: the parent kills the worker long before


def outcome(rng: random.Random, record_id: str) -> ExecutionRecord:
    """A random execution (success with high or low quality, or a failure)."""
    success = rng.random() < 0.7
    quality = rng.choice((0.2, 0.9)) if success else 0.1
    return ExecutionRecord(record_id=record_id, agent_id=rng.choice(AGENTS),
                           task_type=rng.choice(TASKS), success=success, quality=quality,
                           latency_ms=rng.uniform(1, 500))


def acknowledge(acks: TextIO, lines: list[str]) -> None:
    acks.write("".join(line + "\n" for line in lines))
    acks.flush()


def record_one(router: AgentRouter, acks: TextIO, prefix: str, rng: random.Random) -> None:
    for n in range(LIMIT):
        router.record(outcome(rng, f"{prefix}-{n}"))
        acknowledge(acks, [f"x {prefix}-{n}"])
        if n % 5 == 2:
            agent, task, name = rng.choice(AGENTS), rng.choice(TASKS), rng.choice(SIGNALS)
            router.signal(agent, task, name)
            acknowledge(acks, [f"s {agent} {task} {name}"])
        if n % 7 == 3:
            agent, task, approved = rng.choice(AGENTS), rng.choice(TASKS), rng.random() < 0.5
            router.review(agent, task, approved)
            acknowledge(acks, [f"r {agent} {task} {int(approved)}"])


def record_batches(router: AgentRouter, acks: TextIO, prefix: str,
                   rng: random.Random) -> None:
    n = 0
    while n < LIMIT:
        batch = [outcome(rng, f"{prefix}-{n + i}") for i in range(rng.randint(1, 40))]
        n += len(batch)
        assert router.record_many(batch) == len(batch)
        acknowledge(acks, [f"x {r.record_id}" for r in batch])


def main(mode: str, url: str, ack_path: str, prefix: str, seed: str) -> None:
    rng = random.Random(seed)
    with AgentRouter(agents=list(AGENTS), store=url, seed=0) as router, \
            open(ack_path, "a", encoding="utf-8") as acks:
        if mode == "record":
            record_one(router, acks, prefix, rng)
        else:
            record_batches(router, acks, prefix, rng)
        threading.Event().wait()  # LIMIT reached: wait for the kill


if __name__ == "__main__":
    main(*sys.argv[1:])

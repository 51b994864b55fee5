"""A worker process for the learning tests: its own AgentRouter on a server URL, recording
what the routers of other processes (and of the test) then learn from.

``python tests/learning_worker.py URL DATABASE COMMAND ...``:

- ``workload WAIT_S RUNS``: RUNS routed executions of task type ``code`` over agents
  a-d of unequal skill, some without a quality (they await a verdict for WAIT_S, the
  ``feedback.wait_s``), and a verdict on an earlier execution every fifth run (late
  feedback); closes (its cached projection is written) and prints ``done``;
- ``verdicts WAIT_S COUNT``: a verdict on each of the COUNT oldest executions of the
  log (late feedback, on runs long out of the windows), from a router opened after
  they were recorded; prints ``done``;
- ``attempt AGENT SUCCESS TASK_ID ATTEMPT TIMESTAMP``: records one attempt at a user
  task (``metadata={"task_id", "attempt"}``; SUCCESS ``1``/``0``; TIMESTAMP ISO 8601,
  when it ran), then prints one JSON line of what this router holds for agent ``a`` on
  ``t``: its contradictions, its ``last_seen`` and how many pairs a decay run now would
  decay (``run_decay(dry_run=True)``).

Credentials come from TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime
from typing import Any

from trustroute import AgentRouter
from trustroute.router.trust.lifecycle import run_decay

WORKLOAD = {"agents": ["a", "b", "c", "d"], "seed": 0}
SKILL = {"a": 0.9, "b": 0.6, "c": 0.5, "d": 0.3}
RESCUES = {"agents": ["a", "b"], "seed": 0}


def options(url: str, database: str, wait_s: str) -> dict[str, Any]:
    """The router of the workload and of the tests that read it (the same options)."""
    return {"store": url, "store_options": {"database": database}, **WORKLOAD,
            "feedback": {"wait_s": float(wait_s), "default": "outcome"}}


def route_and_judge(router: AgentRouter, runs: int, skill: dict[str, float]) -> None:
    """``runs`` routed executions of ``code``, some without a quality (they await a
    verdict), and a verdict on an earlier one every fifth run; seeded draws."""
    draws = random.Random(1)
    ids = []
    for n in range(runs):
        decision = router.select("code")
        ok = draws.random() < skill[decision.agent_id]
        quality = None if ok and draws.random() < 0.4 else (
            draws.uniform(0.5, 1) if ok else 0.0)
        ids.append(router.record(decision, success=ok, quality=quality).record_id)
        if n % 5 == 0:
            router.feedback(draws.choice(ids), score=round(draws.random(), 2))


def workload(url: str, database: str, wait_s: str, runs: int) -> None:
    with AgentRouter(**options(url, database, wait_s)) as router:
        route_and_judge(router, runs, SKILL)
    print("done", flush=True)


def verdicts(url: str, database: str, wait_s: str, count: int) -> None:
    draws = random.Random(2)
    with AgentRouter(**options(url, database, wait_s)) as router:
        for row in router.store.executions.scan()[:count]:
            router.feedback(row.record.record_id, score=round(draws.random(), 2))
    print("done", flush=True)


def held(router: AgentRouter) -> dict[str, Any]:
    """What the router holds for ``a`` on ``t`` (its contradictions and ``last_seen``),
    and how many pairs a decay run now would decay (the tests read routers so too)."""
    counts = router.trust_layer.book.counts("a", "t")
    seen = counts.last_seen.isoformat() if counts.last_seen else None
    return {"contradictions": counts.contradictions, "last_seen": seen,
            "decayed": run_decay(router, dry_run=True).decayed}


def attempt(url: str, database: str, agent: str, success: str, task_id: str,
            number: str, timestamp: str) -> None:
    with AgentRouter(store=url, store_options={"database": database}, **RESCUES) as router:
        router.record(agent_id=agent, task_type="t", success=success == "1",
                      timestamp=datetime.fromisoformat(timestamp),
                      metadata={"task_id": task_id, "attempt": int(number)})
        print(json.dumps(held(router)), flush=True)


def main() -> None:
    url, database, command, *args = sys.argv[1:]
    if command == "workload":
        workload(url, database, args[0], int(args[1]))
    elif command == "verdicts":
        verdicts(url, database, args[0], int(args[1]))
    elif command == "attempt":
        attempt(url, database, *args)
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()

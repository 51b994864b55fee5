"""Worker processes for the shared-limits tests: each opens its own router on a server
URL, as one worker of a multi-process app would.

``python tests/lease_workers.py MODE URL DATABASE [options]``:

- ``run``: ``--calls N`` tasks through a ``RoutedRunnable`` (``--threads`` at once)
  whose one agent, ``api`` (``max_concurrent: --limit``), counts the calls in flight
  itself in ``--gauge FILE`` (a JSON file updated under ``flock``): the largest number
  ever in flight at once, across every process, is its ``max``. Prints the tasks done,
  and how many leases were lost (expired before renewed) and calls started without
  the store (fail open): ``12 lost=0 fail_opens=0``.
- ``hammer``: ``--threads`` threads each make ``--calls`` calls: take a lease of ``api``
  with ``acquire`` (trying again within 10 ms while it is full), hold it a few
  milliseconds (counted in ``--gauge``), release it: many takers racing for few slots.
  Prints the same as ``run``.
- ``hold``: takes ``--limit`` leases of ``api``, prints ``held`` and sleeps until killed.
- ``rpm``: for ``--seconds``, tries to start calls of ``api`` (``rpm: --rpm``) and
  releases each at once; prints how many started.

``--start-at T`` waits until ``time.time()`` reaches T first, so workers start together;
``--local`` counts per process (``limits.shared: false``); ``--closed`` refuses calls
while the store cannot be reached (``limits.on_store_error: closed``), so every call
counted by the gauge held a lease in the store. Credentials come from
TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableLambda

from trustroute import AgentAtCapacity, AgentRouter, NoAgentAvailable
from trustroute.integrations.langchain import RoutedRunnable, fixed_task_type
from trustroute.router.limits import LimitSettings


class Gauge:
    """Calls in flight, counted in a file shared by every process (under flock)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def move(self, step: int) -> None:
        """Add ``step`` to the calls in flight (and to the calls started when positive)."""
        with self.path.open("r+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            text = handle.read()
            state = json.loads(text) if text else {"now": 0, "max": 0, "calls": 0}
            state["now"] += step
            state["max"] = max(state["max"], state["now"])
            state["calls"] += step > 0
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(state))

    def call(self, seconds: float) -> str:
        """One agent call: in flight for ``seconds``."""
        self.move(+1)
        try:
            time.sleep(seconds)
        finally:
            self.move(-1)
        return "done"


def router(args: argparse.Namespace, agent: dict[str, Any]) -> AgentRouter:
    limits = LimitSettings(shared=not args.local, lease_ttl_s=args.ttl,
                           on_store_error="closed" if args.closed else "open")
    return AgentRouter([agent], store=args.url, limits=limits, seed=0,
                       store_options={"database": args.database})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "hammer", "hold", "rpm"])
    parser.add_argument("url")
    parser.add_argument("database")
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--rpm", type=int, default=None)
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--call-s", type=float, default=0.05)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--ttl", type=float, default=15.0)
    parser.add_argument("--gauge", type=Path)
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--local", action="store_true")
    parser.add_argument("--closed", action="store_true")
    args = parser.parse_args()
    agent = {"id": "api", "max_concurrent": args.limit, "rpm": args.rpm}
    with router(args, agent) as r:
        time.sleep(max(0.0, args.start_at - time.time()))
        if args.mode == "run":
            gauge = Gauge(args.gauge)
            runnable = RoutedRunnable(router=r, task_type=fixed_task_type("call"),
                                      agents={"api": RunnableLambda(
                                          lambda _: gauge.call(args.call_s))})
            out = runnable.batch([{}] * args.calls, config={"max_concurrency": args.threads})
            print(len(out), outcome(r), flush=True)
        elif args.mode == "hammer":
            print(hammer(r, Gauge(args.gauge), args), outcome(r), flush=True)
        elif args.mode == "hold":
            leases = [r.acquire("api") for _ in range(args.limit)]
            print("held", len(leases), flush=True)
            time.sleep(3600)
        else:
            started, end = 0, time.monotonic() + args.seconds
            while time.monotonic() < end:
                try:
                    r.acquire("api").release()
                    started += 1
                except AgentAtCapacity:
                    time.sleep(0.01)
            print(started, flush=True)


def hammer(r: AgentRouter, gauge: Gauge, args: argparse.Namespace) -> int:
    """Take, hold a few ms, release, ``--calls`` times on each of ``--threads`` threads;
    calls made."""
    made = [0] * args.threads

    def loop(i: int) -> None:
        while made[i] < args.calls:
            try:
                lease = r.acquire("api")
            except (AgentAtCapacity, NoAgentAvailable):
                time.sleep(random.uniform(0, 0.01))  # racing, without burning a core
                continue
            with lease:
                gauge.call(random.random() * 0.004)
            made[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(made)


def outcome(r: AgentRouter) -> str:
    """Leases lost and calls started without the store, in this process."""
    shared = r.slots.shared
    if shared is None:
        return "lost=0 fail_opens=0"
    return f"lost={shared.lost} fail_opens={shared.fail_opens}"


if __name__ == "__main__":
    main()

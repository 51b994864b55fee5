"""A worker process for the convergence tests: its own router writes, then (optionally)
waits until it holds what the whole store holds, never calling ``refresh()``.

``python tests/convergence_workers.py URL ACKED [--database D] [--count N] [--pause S]
[--batch B] [--expect FILE] [--report FILE] [--sync-delay S] [--request-timeout S]``
records COUNT outcomes, one ``record()`` each (``--batch B``: ``record_many`` in
batches of B, as an import does), and appends each acknowledged record id to ACKED.
With ``--expect``: once FILE exists it holds the number of executions stored; the
worker polls its router's profile totals until they reach it (or 60 s pass) and writes
``{"total", "waited_s"}`` as JSON to ``--report``. Credentials come from
TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from trustroute import AgentRouter
from trustroute.profiles.records import ExecutionRecord

AGENTS = ["a", "b", "c"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("acked")
    parser.add_argument("--database", default="trustroute")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--batch", type=int, default=0)
    parser.add_argument("--expect")
    parser.add_argument("--report")
    parser.add_argument("--sync-delay", type=float, default=1.0)
    parser.add_argument("--request-timeout", type=float, default=10.0)
    args = parser.parse_args()
    options = {"database": args.database, "sync_delay_s": args.sync_delay,
               "request_timeout_s": args.request_timeout}
    with AgentRouter(agents=AGENTS, store=args.url, store_options=options,
                     seed=os.getpid()) as router, \
            open(args.acked, "a", encoding="utf-8") as acked:
        records = [ExecutionRecord(agent_id=AGENTS[n % 3], task_type="code",
                                   success=n % 3 != 0, quality=0.8,
                                   record_id=f"{os.getpid()}-{n}") for n in range(args.count)]
        step = args.batch or 1
        for start in range(0, len(records), step):
            chunk = records[start:start + step]
            if args.batch:
                router.record_many(chunk, batch_size=step)
            else:
                router.record(chunk[0])
            acked.write("".join(r.record_id + "\n" for r in chunk))
            acked.flush()
            time.sleep(args.pause)
        if args.expect:
            expect = Path(args.expect)
            while not expect.exists():
                time.sleep(0.02)
            target = int(expect.read_text().strip() or 0)
            begin = time.monotonic()
            held = 0
            while time.monotonic() - begin < 60.0:
                held = sum(p.executions_total for p in router.profiles())
                if held >= target:
                    break
                time.sleep(0.02)
            Path(args.report).write_text(json.dumps(
                {"total": held, "waited_s": time.monotonic() - begin}))


if __name__ == "__main__":
    main()

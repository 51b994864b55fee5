"""Worker processes for the server tests: each opens its own router on a server URL and
routes and records, as one worker of a multi-process app would.

``python tests/server_workers.py URL COUNT ACKED_FILE [--database D] [--pause S]
[--together]`` records COUNT outcomes (``select`` then ``record``), each under a record
id chosen before the first try, and appends each acknowledged id to ACKED_FILE as soon
as ``record`` returns. A ``DuplicateRecord`` for an id this worker chose means its own
earlier try committed and the answer was lost: that id is stored, so it counts as
acknowledged. With ``--together`` it prints ``ready`` once its imports are done and
opens its router only at a line ``go`` on stdin, so that a test can open several
workers' routers at one moment however long starting Python takes on a busy machine.
Credentials come from TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS. Errors go to stderr and
exit non-zero.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import uuid

from trustroute import AgentRouter
from trustroute.profiles.store import DuplicateRecord


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("count", type=int)
    parser.add_argument("acked")
    parser.add_argument("--task-type", default="code")
    parser.add_argument("--database", default="trustroute")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between records")
    parser.add_argument("--together", action="store_true",
                        help="print 'ready', open the router at a line 'go' on stdin")
    args = parser.parse_args()
    if args.together:
        print("ready", flush=True)
        sys.stdin.readline()
    with AgentRouter(agents=["a", "b", "c"], store=args.url, seed=os.getpid(),
                     store_options={"database": args.database}) as router, \
            open(args.acked, "a", encoding="utf-8") as acked:
        for n in range(args.count):
            decision = router.select(args.task_type)
            record_id = f"{os.getpid()}-{n}-{uuid.uuid4().hex[:8]}"
            with contextlib.suppress(DuplicateRecord):  # our own try committed, unanswered
                router.record(decision, success=n % 3 != 0, quality=0.8,
                              record_id=record_id)
            acked.write(record_id + "\n")
            acked.flush()
            time.sleep(args.pause)


if __name__ == "__main__":
    main()

"""A worker process for the feedback tests: its own AgentRouter on a server URL.

``python tests/feedback_worker.py URL DATABASE COMMAND ...``:

- ``record TASK_TYPE``: select and record one success without quality (pending); prints
  the decision id, then waits until a verdict from another process settled it, and
  prints ``seen <time.time()> <its quality>``;
- ``send AGENT TASK_TYPE N``: records N successes of AGENT without quality (runs that
  await verdicts); prints ``sent``;
- ``peek AGENT TASK_TYPE N``: as ``send``, then reads the pair's profile as of 2030 and
  prints ``peeked <its pending count>`` (a read must settle nothing);
- ``give REF APPROVED``: one verdict on REF (approved ``1``/``0``); prints ``given``;
- ``stream REFS_FILE ACKED_FILE``: one verdict per line of REFS_FILE (``ref feedback_id
  approved``), appending each feedback id to ACKED_FILE once ``feedback`` returned.

Credentials come from TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

from trustroute import AgentRouter

AGENTS = ["a", "b"]
POLICY = {"wait_s": 3600, "default": "ignore"}


def main() -> None:
    url, database, command, *args = sys.argv[1:]
    agents = [*AGENTS, args[0]] if command in ("send", "peek") else AGENTS
    with AgentRouter(agents=agents, store=url, seed=0, feedback=POLICY,
                     store_options={"database": database, "sync_delay_s": 0.5}) as router:
        if command == "record":
            decision = router.select(args[0])
            router.record(decision, success=True)
            router.flush()
            print(decision.decision_id, flush=True)
            deadline = time.monotonic() + 60
            while router.profile(decision.agent_id, args[0]).pending:
                if time.monotonic() > deadline:
                    sys.exit("no verdict reached this process")
                time.sleep(0.01)
            quality = router.profile(decision.agent_id, args[0]).avg_quality
            print(f"seen {time.time()} {quality}", flush=True)
        elif command in ("send", "peek"):
            for _ in range(int(args[2])):
                router.record(agent_id=args[0], task_type=args[1], success=True)
            router.flush()
            if command == "peek":
                later = datetime(2030, 1, 1, tzinfo=UTC)
                print(f"peeked {router.profile(args[0], args[1], now=later).pending}",
                      flush=True)
            else:
                print("sent", flush=True)
        elif command == "give":
            router.feedback(args[0], approved=args[1] == "1")
            print("given", flush=True)
        elif command == "stream":
            with open(args[0], encoding="utf-8") as refs, \
                    open(args[1], "a", encoding="utf-8") as acked:
                for line in refs:
                    ref, feedback_id, approved = line.split()
                    router.feedback(ref, approved=approved == "1", feedback_id=feedback_id,
                                    key="user")
                    acked.write(feedback_id + "\n")
                    acked.flush()


if __name__ == "__main__":
    main()

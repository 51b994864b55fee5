"""A running app for tests/test_cli_snapshot.py: holds an embedded store and writes
snapshots of it every 0.2 s, recording in rounds told on stdin.

    python snapshot_app.py URL

Each line on stdin is a number N: the app records N executions of ("code", agent) with
decisions, logs a hand-off decision and a pending hand-off, then prints
``done TOTAL`` (the executions recorded so far). It exits at the end of stdin.
"""

from __future__ import annotations

import sys

from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest


def main(url: str) -> None:
    total = 0
    with AgentRouter(["coder", "writer"], store=url, seed=3,
                     store_options={"snapshot_interval_s": 0.2}) as router:
        print("ready", flush=True)
        for line in sys.stdin:
            for i in range(int(line)):
                decision = router.select("code")
                router.record(decision, success=i % 4 != 0, quality=0.75, latency_ms=2.0)
                total += 1
            router.store.repository(HandoffRepository).record_decision(
                task_type="code", transferred=True, confidence=0.3, insufficient=False,
                reason="low confidence")
            TransferDispatcher(store=router.store).dispatch(
                TransferRequest(reason="no hook", task_type="code"))
            router.flush()
            print(f"done {total}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

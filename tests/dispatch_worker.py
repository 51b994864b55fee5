"""A worker process for the hand-off delivery tests: an app's AgentRouter whose own
hand-offs go to one webhook hook ``desk`` through its background queue, while its sweep
retries what stayed pending in the shared server store (its rows and other workers').

``python tests/dispatch_worker.py URL DATABASE RECEIVER_URL COUNT SWEEP_S``: opens the
router (sweeping every SWEEP_S), prints ``open``; at a line ``go`` on stdin dispatches
COUNT hand-offs (each stored, then queued) and prints their request ids on one line; at
a line ``close`` (or the end of stdin) closes the router and prints ``closed``.
Credentials come from TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS.
"""

from __future__ import annotations

import sys

from trustroute import AgentRouter
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest, WebhookHook


def main() -> None:
    url, database, receiver, count, sweep_s = sys.argv[1:]
    desk = WebhookHook(receiver, name="desk", attempts=1, timeout_s=10)
    transfer = TransferDispatcher([desk], settings=HandoffSection(
        dispatch_retry_interval_s=float(sweep_s)))
    with AgentRouter(agents=["a"], store=url, transfer=transfer,
                     store_options={"database": database}):
        print("open", flush=True)
        for line in sys.stdin:
            if line.strip() == "go":
                ids = [transfer.dispatch(TransferRequest(reason=f"slow desk {n}"))
                       .request.request_id for n in range(int(count))]
                print(" ".join(ids), flush=True)
            elif line.strip() == "close":
                break
    print("closed", flush=True)


if __name__ == "__main__":
    main()

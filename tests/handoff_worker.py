"""A worker process for the hand-off tests: its own AgentRouter with one webhook hook on a
server URL, which retries pending hand-offs from when it opens.

``python tests/handoff_worker.py URL DATABASE RECEIVER_URL SWEEP_S``: opens the router
(its sweep runs every SWEEP_S), prints ``open``, lives until a line on stdin (or its
end), closes, prints ``closed``. Credentials come from TRUSTROUTE_DB_USER /
TRUSTROUTE_DB_PASS.
"""

from __future__ import annotations

import sys

from trustroute import AgentRouter
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer import TransferDispatcher, WebhookHook


def main() -> None:
    url, database, receiver, sweep_s = sys.argv[1:]
    desk = WebhookHook(receiver, name="desk", attempts=1, timeout_s=5)
    transfer = TransferDispatcher([desk], settings=HandoffSection(
        dispatch_retry_interval_s=float(sweep_s)))
    with AgentRouter(agents=["a"], store=url, transfer=transfer,
                     store_options={"database": database}):
        print("open", flush=True)
        sys.stdin.readline()
    print("closed", flush=True)


if __name__ == "__main__":
    main()

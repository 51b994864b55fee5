"""Waiting for a background queue to drain, with a deadline (hand-off delivery and the
LangChain background evaluator both close this way)."""

from __future__ import annotations

import queue
import time
from typing import Any


def drained(q: queue.Queue[Any], timeout_s: float | None = None) -> bool:
    """Wait until every item put on ``q`` is done (``task_done``), at most ``timeout_s``
    seconds (None: no limit); True when none is left."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with q.all_tasks_done:
        while q.unfinished_tasks:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            q.all_tasks_done.wait(left)
    return True

"""What ``observe`` would have read from the book, recovered for a batch applied first.

The router applies a whole committed batch to the profile book, then hands it to the
strategy's ``observe_many``; one by one, ``observe`` saw the book as of each record.
The two things it read are recovered here from the batch itself: the task type's
clock after each record, and which of an agent's profiles existed at a given record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileState
from trustroute.profiles.records import ExecutionRecord


def clocks_as_of_each(types: Sequence[str], seqs: np.ndarray, clock_before: Callable[[str], int],
                      book: ProfileBook) -> np.ndarray:
    """Each record's task-type clock as ``book.clock`` gave it right after the record.

    That is the running maximum of the type's seqs, from its clock before the batch
    (``clock_before``, e.g. the strategy's own, which saw every record the book
    applied). A book clock beyond every seq of the batch was there before it and
    counts from the start.
    """
    running: dict[str, int] = {}
    clocks = []
    for task_type, seq in zip(types, seqs.tolist(), strict=True):
        clock = running.get(task_type)
        clock = running[task_type] = max(clock_before(task_type) if clock is None else clock,
                                         seq)
        clocks.append(clock)
    out = np.array(clocks, dtype=np.int64)
    for task_type, clock in running.items():
        before = book.clock(task_type)
        if before > clock:
            out[[i for i, t in enumerate(types) if t == task_type]] = before
    return out


def states_as_of(agent_id: str, committed: Sequence[tuple[ExecutionRecord, int]], end: int,
                 book: ProfileBook) -> list[ProfileState]:
    """The agent's profiles that existed after the first ``end`` records of the batch, in
    the book's order, given a book that holds the whole batch."""
    later: dict[str, int] = {}
    for record, _ in committed[end:]:
        if record.agent_id == agent_id:
            later[record.task_type] = later.get(record.task_type, 0) + 1
    return [state for state in book.for_agent(agent_id)
            if state.executions_total > later.get(state.task_type, 0)]

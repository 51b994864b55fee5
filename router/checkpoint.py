"""A router's projection as text, for the store's projection cache.

``dump`` turns what a router folded (profile states with their windows, task clocks,
the log keys it keeps to place late rows, trust counts, the rescue tracker's recent
tasks, and per log table and writer how far it folded: its frontiers; and, when verdicts
or pending runs make it needed, the feedback state: docs/feedback.md) into JSON chunks;
``load`` turns them back. JSON writes floats in their shortest exact form, so a loaded
projection equals the dumped one bit for bit. Log keys (of window entries and tails)
stamped more than ``ORDER_HORIZON_S`` before the newest are left out, except each task
type's newest: a row that arrives later with an older stamp (a clock stepped back, a
slow commit) finds the book's remembered keys newer than it, and the router rebuilds
from the log (exact, only slower).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trustroute.profiles.profile import ProfileState, WindowEntry
from trustroute.profiles.store.executions import LogKey
from trustroute.profiles.trust_counts import COUNTERS, Pair, TrustCounts

CHUNK_PAIRS = 2000  # pairs per chunk row
#: Log keys stamped this long before the newest are not cached (commits and clocks
#: rarely reorder rows further apart; when they do, the router rebuilds).
ORDER_HORIZON_S = 5.0
CHUNK_ROWS = 20_000  # feedback runs (or verdicts, ...) per chunk row
FEEDBACK_LISTS = ("runs", "decisions", "verdicts", "pairs")  # of FeedbackState.export()


@dataclass(slots=True)
class Checkpoint:
    """Everything a router folded; window keys kept from ``settled`` (POSIX s) on."""

    settled: float
    states: list[ProfileState]
    clocks: dict[str, int]
    tails: dict[str, list[LogKey]]
    trust: dict[Pair, TrustCounts]
    frontiers: dict[str, dict[str, Any]]  # per log table, ``Frontier.export()``
    people_total: int  # feedback rows folded
    window_size: int  # the book's: a cached window holds at most this many
    feedback: dict[str, Any] | None = None  # ``FeedbackState.export()``; None: not carried
    rescues: list[Any] = field(default_factory=list)  # ``RescueTracker.export()``


def horizon(tails: dict[str, list[LogKey]]) -> float:
    """The stamp from which window keys are kept: ``ORDER_HORIZON_S`` before the newest."""
    newest = max((keys[-1].stored_at for keys in tails.values() if keys), default=0.0)
    return newest - ORDER_HORIZON_S


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _state_row(s: ProfileState, settled: float) -> list[Any]:
    window = [[e.timestamp, e.quality, e.success, e.seq,
               list(e.key) if e.key is not None and e.key[0] > settled else None]
              for e in s.window]
    return [s.agent_id, s.task_type, s.executions_total, s.executions_successful,
            s.quality_sum, s.latency_sum_ms, s.cost_sum, s.cost_count,
            _when(s.last_updated), window, s.unjudged, s.pending]


def _state(row: list[Any], window_size: int) -> ProfileState:
    (agent, task, total, successful, quality, latency, cost, cost_count, last,
     window, unjudged, pending) = row
    entries = deque((WindowEntry(t, q, bool(ok), seq, None if key is None else LogKey(*key))
                     for t, q, ok, seq, key in window), maxlen=window_size)
    return ProfileState(agent, task, window_size, total, successful, quality, latency,
                        cost, cost_count, _moment(last), entries, int(unjudged), int(pending))


def _trust_row(pair: Pair, c: TrustCounts) -> list[Any]:
    return [*pair, [getattr(c, n) for n in COUNTERS], c.reviewed, _when(c.reviewed_at),
            _when(c.last_seen)]


def _trust(row: list[Any]) -> tuple[Pair, TrustCounts]:
    agent, task, counters, reviewed, reviewed_at, last_seen = row
    counts = TrustCounts(**dict(zip(COUNTERS, counters, strict=True)), reviewed=reviewed,
                         reviewed_at=_moment(reviewed_at), last_seen=_moment(last_seen))
    return (agent, task), counts


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, max(len(items), 1), size):
        yield items[start:start + size]


def dump(cp: Checkpoint) -> tuple[str, list[str]]:
    """The checkpoint as (meta, chunks) text."""
    meta = json.dumps({"settled": cp.settled, "window_size": cp.window_size,
                       "clocks": cp.clocks,
                       "tails": {t: [list(k) for k in keys[:-1] if k.stored_at > cp.settled]
                                 + [list(k) for k in keys[-1:]]
                                 for t, keys in cp.tails.items()},
                       "frontiers": cp.frontiers, "people_total": cp.people_total,
                       "feedback": None if cp.feedback is None else
                       {"policy": cp.feedback["policy"]}})
    trust = [_trust_row(p, c) for p, c in cp.trust.items()]
    states = [_state_row(s, cp.settled) for s in cp.states]
    chunks = [json.dumps({"states": list(part)}) for part in _batches(states, CHUNK_PAIRS)]
    chunks += [json.dumps({"trust": list(part)}) for part in _batches(trust, 4 * CHUNK_PAIRS)]
    chunks += [json.dumps({"rescues": list(part)})
               for part in _batches(cp.rescues, CHUNK_ROWS) if part]
    carried = cp.feedback or {}
    for name in FEEDBACK_LISTS if carried else ():
        chunks += [json.dumps({f"feedback_{name}": list(part)})
                   for part in _batches(carried[name], CHUNK_ROWS)]
    return meta, chunks


def load(meta: str, chunks: Iterable[str], window_size: int) -> Checkpoint | None:
    """A checkpoint from its text, or None when it was folded with windows of another
    size than ``window_size`` (the book's): its windows hold at most that many. Text of
    another shape raises (ValueError, KeyError, TypeError): the caller ignores it."""
    head = json.loads(meta)
    if head.get("window_size") != window_size:
        return None
    cp = Checkpoint(head["settled"], [], head["clocks"],
                    {t: [LogKey(*k) for k in keys] for t, keys in head["tails"].items()},
                    {}, head["frontiers"], int(head["people_total"]), window_size,
                    None if head["feedback"] is None else
                    {"policy": head["feedback"]["policy"], **{n: [] for n in FEEDBACK_LISTS}})
    for text in chunks:
        part = json.loads(text)
        cp.states += [_state(row, window_size) for row in part.get("states", ())]
        cp.trust.update(_trust(row) for row in part.get("trust", ()))
        cp.rescues += part.get("rescues", ())
        for name in FEEDBACK_LISTS:
            if f"feedback_{name}" in part:
                if cp.feedback is None:
                    raise ValueError("feedback rows in a projection without feedback")
                cp.feedback[name] += part[f"feedback_{name}"]
    return cp

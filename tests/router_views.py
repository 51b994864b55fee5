"""What a router has learned, in a form two routers can be compared by (tests only)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from trustroute import AgentRouter

MOMENT = datetime(2030, 1, 1, tzinfo=UTC)  # every profile is computed at this moment


def view(router: AgentRouter) -> dict[tuple[str, str], Any]:
    """Per pair (learned or only trusted): profile at ``MOMENT``, window with seqs,
    trust counts, and the pair's runs awaiting a verdict as the book lists them."""
    pairs = {(s.agent_id, s.task_type) for s in router.book} | set(
        router.trust_layer.book.pairs())
    out = {}
    for agent_id, task_type in sorted(pairs):
        state = router.book.get(agent_id, task_type)
        window = [] if state is None else [(e.timestamp, e.quality, e.success, e.seq)
                                           for e in state.window]
        out[(agent_id, task_type)] = (
            router.profile(agent_id, task_type, now=MOMENT).model_dump(),
            window, router.trust_layer.book.counts(agent_id, task_type),
            router.book.pending_on(task_type).get(agent_id, 0))
    return out

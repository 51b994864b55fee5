"""The trust lifecycle job: decay what is not seen, deprecate what fell, retire the dead.

``run_decay`` is safe to run on any schedule: it does its work at most once per ISO week
(the week is recorded in the store, and each pair's decay is guarded by the week too), so
a second run in the same week changes nothing. For every pair unseen for
``unseen_days`` it adds one week of decay to the offsets subtracted from the three
scores; a pair whose composite falls below ``deprecate_below`` is marked deprecated
(since its last evidence when that evidence already put it there, else from now; the
tier policy stops selecting it at once); a pair deprecated for more than
``delete_after_days`` is retired: its executions are moved to ``execution_archive`` and
its profile and counts to ``trust_archive`` in one transaction. Every score change is
appended to the confidence history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from trustroute.profiles.records import utc_now
from trustroute.profiles.store import Store
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router.trust.decay import (
    DecaySettings,
    decay_once,
    due_for_deletion,
    is_unseen,
    iso_week,
)
from trustroute.router.trust.layer import history_row
from trustroute.router.trust.scores import DEFAULT_WEIGHTS, trust_scores

if TYPE_CHECKING:
    from trustroute.router.router import AgentRouter


@dataclass(slots=True)
class DecayReport:
    """What one run of the decay job did."""

    week: str
    already_applied: bool = False
    decayed: int = 0
    deprecated: int = 0
    deleted: int = 0
    archived_executions: int = 0
    retired: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**asdict(self), "retired": [list(p) for p in self.retired]}


def run_decay(target: AgentRouter | Store, *, now: datetime | None = None,
              settings: DecaySettings | None = None,
              weights: tuple[float, float, float] | None = None) -> DecayReport:
    """Run the weekly trust lifecycle on a router (its settings; it is refreshed after)
    or directly on a store."""
    from trustroute.router.router import AgentRouter

    router = target if isinstance(target, AgentRouter) else None
    if router is not None:
        router.flush()
        options = router.trust_layer.options
        settings = settings or options.decay
        weights = weights or options.weights
    store = router.store if router is not None else target
    assert isinstance(store, Store)
    report = decay_store(store, now=now or utc_now(), settings=settings or DecaySettings(),
                         weights=weights or DEFAULT_WEIGHTS)
    if router is not None and not report.already_applied:
        router.refresh()
    return report


def decay_store(store: Store, *, now: datetime, settings: DecaySettings,
                weights: tuple[float, float, float]) -> DecayReport:
    """The job itself, on one store."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    repo = store.repository(TrustRepository)
    week = iso_week(now)
    report = DecayReport(week)
    if repo.week_applied(week) is not None:
        report.already_applied = True
        return report
    changes, marks, history, doomed = [], [], [], []
    for (agent_id, task_type), counts in sorted(repo.load(times=True).items()):
        before = trust_scores(counts, weights)
        current = counts
        if is_unseen(counts, now, settings):
            current = decay_once(counts, settings)
            report.decayed += 1
        after = trust_scores(current, weights)
        if current is not counts:
            changes.append({"agent_id": agent_id, "task_type": task_type,
                            "frequency": settings.frequency,
                            "effectiveness": settings.effectiveness, "human": settings.human,
                            "tier": str(after.tier)})
        if after != before:
            history.append(history_row(agent_id, task_type, after, "decay: unseen", now))
        below = after.composite < settings.deprecate_below
        if below and counts.deprecated_at is None:
            # Already below before this week's decay: its own evidence put it there, so it
            # has been deprecated since that evidence; otherwise it fell just now.
            was_below = before.composite < settings.deprecate_below
            counts.deprecated_at = (counts.last_seen or now) if was_below else now
            marks.append({"agent_id": agent_id, "task_type": task_type,
                          "at": counts.deprecated_at})
            history.append(history_row(agent_id, task_type, after, "deprecated", now))
            report.deprecated += 1
        if below and due_for_deletion(counts, now, settings):
            doomed.append((agent_id, task_type, after))
        elif not below and counts.deprecated_at is not None:  # recovered: lift the mark
            marks.append({"agent_id": agent_id, "task_type": task_type, "at": None})
            history.append(history_row(agent_id, task_type, after, "restored", now))
    repo.decay(week, changes, marks, history)
    for agent_id, task_type, scores in doomed:
        report.archived_executions += repo.retire(
            agent_id, task_type,
            history_row(agent_id, task_type, scores, "deleted: deprecated too long", now), now)
        report.deleted += 1
        report.retired.append((agent_id, task_type))
    repo.record_run(week, report.decayed, report.deprecated, report.deleted, now)
    return report

"""The trust lifecycle job: decay what is not seen, deprecate what fell, retire the dead.

``run_decay`` is safe to run on any schedule: it does its work at most once per ISO week
(the week is recorded in the store, and each pair's decay is guarded by the week too), so
a second run in the same week changes nothing. For every pair unseen for
``unseen_days`` it adds one week of decay to the offsets subtracted from the three
scores; a pair whose composite falls below ``deprecate_below`` is marked deprecated
as of this run (the tier policy stops selecting it at once); a pair the job marked more
than ``delete_after_days`` ago is retired: its executions are moved to ``execution_archive`` and
its profile and counts to ``trust_archive`` in one transaction. Every score change is
appended to the confidence history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from trustroute.profiles.records import utc_now
from trustroute.profiles.store import Store
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router.router import AgentRouter
from trustroute.router.trust.decay import (
    DecaySettings,
    decay_once,
    due_for_deletion,
    is_unseen,
    iso_week,
)
from trustroute.router.trust.layer import history_row
from trustroute.router.trust.scores import DEFAULT_WEIGHTS, trust_scores


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
        return asdict(self)


def run_decay(target: AgentRouter | Store, *, now: datetime | None = None,
              settings: DecaySettings | None = None,
              weights: tuple[float, float, float] | None = None) -> DecayReport:
    """Run the weekly trust lifecycle on a router (its settings; it is refreshed after)
    or directly on a store."""
    router = target if isinstance(target, AgentRouter) else None
    if router is not None:
        router.flush()
        settings = settings or router.trust_layer.options.decay
        weights = weights or router.trust_layer.options.weights
    store = target.store if isinstance(target, AgentRouter) else target
    report = _decay(store.repository(TrustRepository), now or utc_now(),
                    settings or DecaySettings(), weights or DEFAULT_WEIGHTS)
    if router is not None and not report.already_applied:
        router.refresh()
    return report


def _decay(repo: TrustRepository, now: datetime, settings: DecaySettings,
           weights: tuple[float, float, float]) -> DecayReport:
    """The job itself, on one store."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    report = DecayReport(iso_week(now))
    if repo.week_applied(report.week) is not None:
        report.already_applied = True
        return report
    changes, marks, history, doomed = [], [], [], []
    for (agent_id, task_type), counts in sorted(repo.load().items()):
        pair = {"agent_id": agent_id, "task_type": task_type}
        before = after = trust_scores(counts, weights)
        if is_unseen(counts, now, settings):
            after = trust_scores(decay_once(counts, settings), weights)
            changes.append({**pair, "tier": str(after.tier)})
            report.decayed += 1
        reasons = ["decay: unseen"] if after != before else []
        below = after.composite < settings.deprecate_below
        if below and counts.deprecated_at is None:
            # The deletion clock starts when the job marks the pair, never earlier: a pair
            # imported with old history gets its full grace period before it is deleted.
            counts.deprecated_at = now
            marks.append({**pair, "at": now})
            reasons.append("deprecated")
            report.deprecated += 1
        if below and due_for_deletion(counts, now, settings):
            doomed.append((agent_id, task_type, after))
        elif not below and counts.deprecated_at is not None:  # recovered: lift the mark
            marks.append({**pair, "at": None})
            reasons.append("restored")
        history += [history_row(agent_id, task_type, after, reason, now) for reason in reasons]
    repo.decay(report.week, [settings.frequency, settings.effectiveness, settings.human],
               changes, marks, history)
    for agent_id, task_type, scores in doomed:
        report.archived_executions += repo.retire(
            agent_id, task_type,
            history_row(agent_id, task_type, scores, "deleted: deprecated too long", now), now)
        report.deleted += 1
        report.retired.append((agent_id, task_type))
    repo.record_run(report.week, report.decayed, report.deprecated, report.deleted, now)
    return report

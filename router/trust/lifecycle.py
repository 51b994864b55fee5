"""The trust lifecycle job: decay what is not seen, deprecate what fell, retire the dead.

``run_decay`` is safe to run on any schedule: it does its work at most once per ISO week
(the week is recorded in the store, and each pair's decay is guarded by the week too).
It reads the pairs' trust counts from a router's projection of the log and writes only
the lifecycle's own marks (``trust_lifecycle``), which every router folds in, the
confidence history and, for retired pairs, the archive (docs/trust.md, "Lifecycle").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from trustroute.profiles.records import iso_z, utc_now
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.decay import (
    decay_once,
    due_for_deletion,
    is_unseen,
    iso_week,
)
from trustroute.router.trust.history import history_row
from trustroute.router.trust.scores import trust_scores

if TYPE_CHECKING:
    from trustroute.router.router import AgentRouter


@dataclass(slots=True)
class DecayReport:
    """What one run of the decay job did."""

    week: str
    already_applied: bool = False
    dry_run: bool = False  # what a run would do; nothing was written
    decayed: int = 0
    deprecated: int = 0
    deleted: int = 0
    archived_executions: int = 0
    retired: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def run_decay(router: AgentRouter, *, now: datetime | None = None,
              dry_run: bool = False) -> DecayReport:
    """Run the weekly trust lifecycle on a router's store, with its settings (it is
    refreshed after). ``dry_run``: report what the run would do (the same counts) and
    write nothing. For a bare store, open a router on it: ``AgentRouter(store=store,
    unknown_agents="allow").decay()``."""
    now = now or utc_now()
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise TypeError(f"now must be a timezone-aware datetime, got {now!r}")
    router.flush()
    repo = router.store.repository(TrustRepository)
    report = DecayReport(iso_week(now), dry_run=dry_run)
    if repo.week_applied(report.week) is not None:
        report.already_applied = True
        return report
    book, settings = router.trust_layer.book, router.trust_layer.options.decay
    _check_forward(now, repo.last_run_at(), book, router.settings.max_clock_skew_s)
    changes, marks, history, doomed = [], [], [], []
    for (agent_id, task_type), counts in sorted(book.all_counts().items()):  # copies
        pair = {"agent_id": agent_id, "task_type": task_type}
        before = after = book.scores(agent_id, task_type)
        if is_unseen(counts, now, settings):
            decayed = decay_once(counts, settings)
            after = trust_scores(decayed, book.weights)
            changes.append({**pair, "decay": [decayed.frequency_decay,
                                              decayed.effectiveness_decay,
                                              decayed.human_decay]})
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
    if dry_run:
        report.deleted = len(doomed)
        report.retired = [(agent_id, task_type) for agent_id, task_type, _ in doomed]
        report.archived_executions = sum(router.profile(a, t).executions_total
                                         for a, t, _ in doomed)
        return report
    repo.decay(report.week, now, changes, marks, history)
    for agent_id, task_type, scores in doomed:
        report.archived_executions += repo.retire(
            agent_id, task_type,
            history_row(agent_id, task_type, scores, "deleted: deprecated too long", now), now,
            router.profile(agent_id, task_type).model_dump(mode="json"))
        report.deleted += 1
        report.retired.append((agent_id, task_type))
    repo.record_run(report.week, report.decayed, report.deprecated, report.deleted, now)
    router.refresh()
    return report


def _check_forward(now: datetime, last_run: datetime | None, book: TrustBook,
                   skew_s: float) -> None:
    """Refuse a run as of a moment before the last run or the newest evidence (beyond
    clock skew): its deprecation marks would be dated in the past, and the next run would
    delete those pairs without the grace period the marks promise. Evidence may be
    stamped ``skew_s`` ahead of its writer's clock, which may itself run ``skew_s`` ahead
    of this one's: twice that is allowed there."""
    seen = [c.last_seen for c in book.all_counts().values() if c.last_seen is not None]
    for what, moment, allowed in (("the last decay run", last_run, skew_s),
                                  ("the newest evidence", max(seen, default=None), 2 * skew_s)):
        if moment is not None and (moment - now).total_seconds() > allowed:
            raise ValueError(f"now: {iso_z(now)} is before {what} ({iso_z(moment)}); the "
                             "lifecycle only runs forward")

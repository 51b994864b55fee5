"""What ``trustroute report`` shows, gathered from the store: plain data, no HTML.

Every figure is computed by the code the other commands use, so the numbers agree:
the leaderboard is ``router.profiles()`` (``trustroute profiles``), trust is
``trust_scores`` over the stored counts (``trustroute trust``), and the calibration is
``calibration_report`` over the decision log (``trustroute calibration``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from trustroute.profiles.profile import TaskTypeProfile
from trustroute.profiles.records import utc_now
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.report import ReportRepository
from trustroute.router.report.feedback import Coverage, gather_coverage
from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.calibration import CalibrationReport, calibration_report
from trustroute.router.trust.scores import TrustScores

if TYPE_CHECKING:
    from trustroute.router.router import AgentRouter

RECENT = 100  # the last executions per task type that count as "recent routing"
BUCKETS = 10  # time buckets of the charts over time
TOP_AGENTS = 3  # agents per task type on the trust radar
Progress = Callable[[int], None]
_Row = TypeVar("_Row", bound=tuple[Any, ...])


@dataclass(frozen=True)
class LeaderRow:
    """One agent on a task type's leaderboard."""

    profile: TaskTypeProfile
    share: float | None  # of the task type's last RECENT executions; None: none yet
    trust: TrustScores


@dataclass(frozen=True)
class Bucket:
    """One time bucket: tasks, each agent's share of them and their mean quality."""

    start: datetime
    end: datetime
    tasks: int
    shares: dict[str, float]
    mean_quality: float | None


@dataclass(frozen=True)
class RateBucket:
    """One time bucket of the hand-off log."""

    start: datetime
    end: datetime
    decisions: int
    transferred: int

    @property
    def rate(self) -> float | None:
        """Share handed to a person; None without decisions."""
        return self.transferred / self.decisions if self.decisions else None


@dataclass(frozen=True)
class TrendSeries:
    """A pair's composite trust over time (from ``trust_history``)."""

    agent_id: str
    times: list[datetime]
    composites: list[float]
    tiers: list[str]


@dataclass
class Handoffs:
    """The hand-off section: rate over time per task type, pending, reasons."""

    rates: dict[str, list[RateBucket]] = field(default_factory=dict)
    totals: dict[str, tuple[int, int]] = field(default_factory=dict)  # decisions, transferred
    reasons: Counter[str] = field(default_factory=Counter)  # of transferred decisions
    pending_reasons: Counter[str] = field(default_factory=Counter)  # transfers not delivered


@dataclass
class ReportData:
    """Everything the report shows."""

    store_url: str
    generated_at: datetime
    task_type: str | None
    since: datetime | None
    executions: int  # read from the log (after the filters)
    leaderboards: dict[str, list[LeaderRow]]
    routing: dict[str, list[Bucket]]
    radar: dict[str, list[tuple[str, TrustScores]]]
    trend: dict[str, list[TrendSeries]]
    calibration: CalibrationReport
    handoffs: Handoffs
    #: Per task type: share of executions judged by feedback, median delay.
    feedback: list[Coverage] = field(default_factory=list)


def edges(times: Sequence[datetime], buckets: int = BUCKETS) -> list[datetime]:
    """Bucket edges that follow the data: up to ``buckets`` buckets of (nearly) equal
    task counts, so a burst gets several buckets and a quiet week none to itself (equal
    widths left 7 of 10 buckets empty on bursty traffic). Ascending, without repeats
    (many tasks at one instant share a bucket); one bucket when every time is the same;
    empty without times."""
    if not times:
        return []
    ordered = sorted(times)
    n, k = len(ordered), min(buckets, len(ordered))
    bounds = [ordered[(i * n) // k] for i in range(k)] + [ordered[-1]]
    unique = [t for i, t in enumerate(bounds) if i == 0 or t > bounds[i - 1]]
    return unique if len(unique) > 1 else [ordered[0], ordered[-1]]


def in_buckets(rows: Sequence[_Row], bounds: Sequence[datetime]) -> list[list[_Row]]:
    """``rows`` (time first) in the buckets of ``bounds``: bucket i holds the times from
    ``bounds[i]`` up to ``bounds[i + 1]``, the last one including its upper edge."""
    n = max(0, len(bounds) - 1)
    groups: list[list[_Row]] = [[] for _ in range(n)]
    for row in rows:
        i = bisect_right(bounds, row[0]) - 1
        groups[min(n - 1, max(0, i))].append(row)
    return groups


def axis_range(values: Iterable[float | None], floor_at_zero: bool = True
               ) -> tuple[float, float]:
    """The y range of a chart of rates or qualities in [0, 1], scaled to its data: a
    little beyond the values, on round tenths or hundredths, so a 3-7% hand-off rate
    fills the chart instead of lying flat on a 0-1 axis. ``floor_at_zero``: the range
    starts at 0 (a rate); otherwise just below the lowest value. No values: 0 to 1."""
    found = [v for v in values if v is not None and math.isfinite(v)]
    if not found:
        return 0.0, 1.0
    lo, hi = min(found), max(found)
    pad = max(0.02, (hi - lo) * 0.15)
    step = 0.1 if hi - lo + 2 * pad > 0.3 else 0.01
    top = min(1.0, math.ceil(round((hi + pad) / step, 6)) * step)
    bottom = 0.0 if floor_at_zero else max(0.0, math.floor(round((lo - pad) / step, 6)) * step)
    return round(bottom, 2), round(top, 2)


def routing_buckets(rows: Sequence[tuple[datetime, str, float]], bounds: Sequence[datetime]
                    ) -> list[Bucket]:
    """(time, agent, quality) rows in the buckets of ``bounds``."""
    out = []
    for i, group in enumerate(in_buckets(rows, bounds)):
        tasks = len(group)
        agents = Counter(agent for _, agent, _ in group)
        out.append(Bucket(bounds[i], bounds[i + 1], tasks,
                          {a: c / tasks for a, c in agents.most_common()},
                          sum(q for _, _, q in group) / tasks if tasks else None))
    return out


def rate_buckets(rows: Sequence[tuple[datetime, bool]], bounds: Sequence[datetime]
                 ) -> list[RateBucket]:
    """(time, transferred) rows in the buckets of ``bounds``."""
    return [RateBucket(bounds[i], bounds[i + 1], len(group), sum(moved for _, moved in group))
            for i, group in enumerate(in_buckets(rows, bounds))]


RADAR_AXES = ("frequency", "effectiveness", "human")


def flat_axes(scores: Sequence[TrustScores]) -> dict[str, float]:
    """The radar axes on which every agent shown has the same score (axis -> score):
    such an axis separates nobody. Empty for fewer than two agents."""
    if len(scores) < 2:
        return {}
    out = {}
    for axis in RADAR_AXES:
        values = [float(getattr(s, axis)) for s in scores]
        if max(values) - min(values) < 0.005:
            out[axis] = values[0]
    return out


def leaderboards(profiles: Iterable[TaskTypeProfile], recent: dict[str, Counter[str]],
                 trust: TrustBook) -> dict[str, list[LeaderRow]]:
    """Profiles grouped per task type (their order kept), with share and trust."""
    boards: dict[str, list[LeaderRow]] = {}
    for p in profiles:
        seen = recent.get(p.task_type, Counter())
        total = sum(seen.values())
        boards.setdefault(p.task_type, []).append(LeaderRow(
            p, seen[p.agent_id] / total if total else None,
            trust.scores(p.agent_id, p.task_type)))
    return dict(sorted(boards.items()))


def trend_series(rows: Iterable[dict[str, Any]]) -> dict[str, list[TrendSeries]]:
    """trust_history rows (oldest first) as one series per pair, grouped by task type."""
    series: dict[tuple[str, str], TrendSeries] = {}
    for r in rows:
        key = (str(r["task_type"]), str(r["agent_id"]))
        s = series.setdefault(key, TrendSeries(key[1], [], [], []))
        s.times.append(r["at"])
        s.composites.append(float(r["composite"]))
        s.tiers.append(str(r["tier"]))
    out: dict[str, list[TrendSeries]] = {}
    for (task_type, _), s in sorted(series.items()):
        out.setdefault(task_type, []).append(s)
    return out


def gather_handoffs(repo: ReportRepository, task_type: str | None, since: datetime | None
                    ) -> Handoffs:
    """The hand-off log in time buckets per task type, plus what is still pending."""
    h = Handoffs()
    rows: dict[str, list[tuple[datetime, bool]]] = defaultdict(list)
    for r in repo.handoff_decisions(task_type, since):
        rows[r["task_type"]].append((r["created_at"], bool(r["transferred"])))
        if r["transferred"]:
            h.reasons[r["reason"] or "(no reason given)"] += 1
    for tt, rs in sorted(rows.items()):  # each task type's buckets follow its own data
        h.rates[tt] = rate_buckets(rs, edges([t for t, _ in rs]))
        h.totals[tt] = (len(rs), sum(moved for _, moved in rs))
    for r in repo.pending_handoffs(task_type):
        h.pending_reasons[r["reason"] or "(no reason given)"] += int(r["n"])
    return h


def gather(router: AgentRouter, *, task_type: str | None = None,
           since: datetime | None = None, progress: Progress | None = None,
           source: str | None = None) -> ReportData:
    """Read everything the report shows from ``router``'s store.

    ``progress(n)`` is called as executions are read (n at a time). The leaderboard and
    the calibration cover the whole store, as ``trustroute profiles`` and
    ``trustroute calibration`` do; ``since`` limits what is drawn over time.
    """
    router.flush()
    store = router.store
    repo = store.repository(ReportRepository)
    profiles = router.profiles(task_type)
    rows: dict[str, list[tuple[datetime, str, float]]] = defaultdict(list)
    for p in profiles:  # one indexed read per pair: far cheaper than paging the log
        found = repo.pair_executions(p.agent_id, p.task_type, since)
        if found:
            rows[p.task_type].extend((t, p.agent_id, q) for t, q in found)
        if progress is not None:
            progress(len(found))
    for log in rows.values():
        log.sort(key=lambda r: r[0])
    count = sum(len(log) for log in rows.values())
    recent = {tt: Counter(agent for _, agent, _ in log[-RECENT:]) for tt, log in rows.items()}
    boards = leaderboards(profiles, recent, router.trust_layer.book)
    radar = {tt: [(row.profile.agent_id, row.trust) for row in board[:TOP_AGENTS]]
             for tt, board in boards.items()}
    calibration = calibration_report(
        store.repository(DecisionRepository).confidence_outcomes(None))
    return ReportData(
        store_url=source or store.url, generated_at=utc_now(), task_type=task_type,
        since=since, executions=count, leaderboards=boards,
        routing={tt: routing_buckets(rs, edges([t for t, _, _ in rs]))
                 for tt, rs in sorted(rows.items())},
        radar=radar, trend=trend_series(repo.trust_history(task_type, since)),
        calibration=calibration, handoffs=gather_handoffs(repo, task_type, since),
        feedback=gather_coverage(repo, task_type, since))


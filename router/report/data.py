"""What ``trustroute report`` shows, gathered from the store: plain data, no HTML.

Every figure is computed by the code the other commands use, so the numbers agree:
the leaderboard is ``router.profiles()`` (``trustroute profiles``), trust is
``trust_scores`` over the stored counts (``trustroute trust``), and the calibration is
``calibration_report`` over the decision log (``trustroute calibration``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from trustroute.profiles.profile import TaskTypeProfile
from trustroute.profiles.records import utc_now
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.profiles.store.report import ReportRepository
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


def edges(times: Sequence[datetime], buckets: int = BUCKETS) -> list[datetime]:
    """``buckets + 1`` equal-width bucket edges over the span of ``times`` (one bucket
    when every time is the same); empty without times."""
    if not times:
        return []
    first, last = min(times), max(times)
    if first == last:
        return [first, last]
    step = (last - first) / buckets
    return [first + step * i for i in range(buckets)] + [last]


def in_buckets(rows: Sequence[_Row], bounds: Sequence[datetime]) -> list[list[_Row]]:
    """``rows`` (time first) in the buckets of ``bounds``; the last bucket includes its
    upper edge."""
    n = max(0, len(bounds) - 1)
    groups: list[list[_Row]] = [[] for _ in range(n)]
    span = (bounds[-1] - bounds[0]).total_seconds() if n else 0.0
    for row in rows:
        i = int((row[0] - bounds[0]).total_seconds() / span * n) if span > 0 else 0
        groups[min(n - 1, i)].append(row)
    return groups


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
    bounds = edges([t for rs in rows.values() for t, _ in rs])
    for tt, rs in sorted(rows.items()):
        h.rates[tt] = rate_buckets(rs, bounds)
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
    bounds = edges([t for rs in rows.values() for t, _, _ in rs])
    boards = leaderboards(profiles, recent, router.trust_layer.book)
    radar = {tt: [(row.profile.agent_id, row.trust) for row in board[:TOP_AGENTS]]
             for tt, board in boards.items()}
    calibration = calibration_report(
        store.repository(DecisionRepository).confidence_outcomes(None))
    return ReportData(
        store_url=source or store.url, generated_at=utc_now(), task_type=task_type,
        since=since, executions=count, leaderboards=boards,
        routing={tt: routing_buckets(rs, bounds) for tt, rs in sorted(rows.items())},
        radar=radar, trend=trend_series(repo.trust_history(task_type, since)),
        calibration=calibration, handoffs=gather_handoffs(repo, task_type, since))


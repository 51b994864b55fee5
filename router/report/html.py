"""The report as one self-contained HTML page: inline CSS, images as base64 PNG.

Every section says why when it has nothing to show. Without matplotlib the tables are
still there, with the line that installs the pictures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from html import escape
from types import ModuleType

from trustroute.profiles.records import iso_z
from trustroute.router.report.data import (
    RECENT,
    Bucket,
    Handoffs,
    RateBucket,
    ReportData,
    axis_range,
    flat_axes,
)
from trustroute.router.report.feedback import duration
from trustroute.router.trust.scores import FREQUENCY_BANDS, NEUTRAL_SCORE

PLOT_HINT = 'pip install "trustroute[plot]"'
CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 .8em;max-width:1100px;
color:#222}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;max-width:100%}
.scroll table{margin:0}
@media (max-width:600px){body{margin:.8em auto;font-size:.95em}th,td{padding:.2em .35em}}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.meta,.note{color:#666;font-size:.9em}.empty{color:#a33;font-style:italic}
.hint{background:#fff8dc;border:1px solid #e5d9a8;padding:.5em}
img{max-width:100%;display:block;margin:.4em 0}
.pair{display:flex;gap:1.5em;align-items:flex-start;flex-wrap:wrap}
"""


def load_charts() -> ModuleType | None:
    """The charts module, or None when matplotlib is not installed."""
    try:
        from trustroute.router.report import charts
    except ImportError:
        return None
    return charts


def num(value: float | None, digits: int = 3) -> str:
    """A number for a table cell; a dash for no value."""
    return "–" if value is None else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    """A share as a percentage; a dash for no value."""
    return "–" if value is None else f"{100 * value:.1f}%"


def table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """An HTML table in a box that scrolls sideways when the screen is narrower than
    the table (a phone); cells are already escaped, the first column is left-aligned."""
    out = [f'<div class="scroll"><table class="{cls}"><tr>']
    out += [f'<th class="{"l" if i == 0 else ""}">{escape(h)}</th>' for i, h in enumerate(head)]
    out.append("</tr>")
    for row in rows:
        out.append("<tr>" + "".join(row) + "</tr>")
    return "".join(out) + "</table></div>"


def td(text: str, key: str = "", left: bool = False) -> str:
    """One cell; ``key`` names the figure (``data-k``) so tools can read the table."""
    attrs = (f' data-k="{key}"' if key else "") + (' class="l"' if left else "")
    return f"<td{attrs}>{escape(text)}</td>"


def empty(why: str) -> str:
    """The line an empty section shows."""
    return f'<p class="empty">{escape(why)}</p>'


def image(b64: str, alt: str, y_range: tuple[float, float] | None = None) -> str:
    """An inline PNG; ``y_range`` (the range of its scaled y axis) is written in
    ``data-y`` so tools and tests can read it."""
    y = f' data-y="{y_range[0]:g},{y_range[1]:g}"' if y_range is not None else ""
    return f'<img alt="{escape(alt)}"{y} src="data:image/png;base64,{b64}">'


def when(moment: datetime) -> str:
    """A time as every command shows it: ISO 8601, UTC, ``Z``, to the second."""
    return iso_z(moment.replace(microsecond=0))


def span(buckets: Sequence[Bucket] | Sequence[RateBucket]) -> str:
    """The time span of a bucket list, as text."""
    return (f"{when(buckets[0].start)} to {when(buckets[-1].end)}, "
            f"{len(buckets)} bucket(s)")


def leaderboard(data: ReportData, charts: ModuleType | None) -> str:
    """Section 1: the profiles per task type, with recent share and trust tier."""
    if not data.leaderboards and data.task_type is not None:
        return empty(f"no profiles of task type {data.task_type!r} in this store "
                     "(`trustroute profiles` lists the task types)")
    if not data.leaderboards:
        return empty("no profiles yet: no executions have been recorded in this store "
                     "(record outcomes with `trustroute record`, `import` or `demo`)")
    parts = [f'<p class="note">The numbers of <code>trustroute profiles</code>; share: of '
             f"the last {RECENT} executions of the task type; tier: composite trust.</p>"]
    head = ("agent", "runs", "success", "avg quality", "expertise", "confidence",
            "adjusted", "latency ms", "recent share", "composite", "tier")
    for task_type, board in data.leaderboards.items():
        rows = [[td(r.profile.agent_id, left=True),
                 td(str(r.profile.executions_total), "executions_total"),
                 td(num(r.profile.success_rate), "success_rate"),
                 td(num(r.profile.avg_quality), "avg_quality"),
                 td(num(r.profile.expertise), "expertise"),
                 td(num(r.profile.confidence), "confidence"),
                 td(num(r.profile.adjusted_score), "adjusted_score"),
                 td(num(r.profile.avg_latency_ms, 0), "avg_latency_ms"),
                 td(pct(r.share), "share"), td(num(r.trust.composite), "composite"),
                 td(str(r.trust.tier), "tier")] for r in board]
        parts.append(f'<h3 data-task-type="{escape(task_type)}">{escape(task_type)}</h3>')
        parts.append(table(head, rows, "leaderboard"))
    return "".join(parts)


def routing(data: ReportData, charts: ModuleType | None) -> str:
    """Section 2: share of tasks per agent and mean quality in time buckets."""
    if not data.routing:
        return empty("no executions in the log" + (" since the given date" if data.since
                                                   else "") + " yet: nothing was routed")
    parts = []
    for task_type, buckets in data.routing.items():
        parts.append(f"<h3>{escape(task_type)}</h3><p class=\"note\">{span(buckets)}</p>")
        if charts is not None:
            scale = axis_range((b.mean_quality for b in buckets), floor_at_zero=False)
            parts.append(image(charts.routing_chart(buckets, scale), f"routing of {task_type}",
                               scale))
        rows = [[td(when(b.start), left=True), td(str(b.tasks)),
                 td(num(b.mean_quality)),
                 td(", ".join(f"{a} {pct(s)}" for a, s in b.shares.items()) or "–", left=True)]
                for b in buckets]
        parts.append(table(("bucket start", "tasks", "mean quality", "share per agent"), rows))
    return "".join(parts)


def radar(data: ReportData, charts: ModuleType | None) -> str:
    """Section 3: the three trust scores of each task type's top agents."""
    if not data.radar:
        return empty("no trust data yet: trust grows from recorded outcomes and reviews")
    parts = []
    for task_type, agents in data.radar.items():
        rows = [[td(a, left=True), td(num(s.frequency)), td(num(s.effectiveness)),
                 td(num(s.human)), td(num(s.composite), "composite"), td(str(s.tier))]
                for a, s in agents]
        tab = table(("agent", "frequency", "effectiveness", "human", "composite", "tier"),
                    rows)
        flat = flat_axes([s for _, s in agents])
        # a radar needs axes that differ: with two flat ones it is a line, so say why
        drawn = len(flat) < 2
        pic = image(charts.radar_chart(agents), f"trust radar of {task_type}") \
            if drawn and charts is not None else ""
        parts.append(f'<h3>{escape(task_type)}</h3><div class="pair">{pic}{tab}</div>')
        if flat:
            parts.append(flat_note(flat, drawn))
    return "".join(parts)


def flat_note(flat: dict[str, float], drawn: bool) -> str:
    """Why radar axes carry no information: every agent shown scores the same on them."""
    why = []
    for axis, value in flat.items():
        if axis == "human" and value == NEUTRAL_SCORE:
            why.append(f"human is {value:.2f} for every agent: no person has reviewed them "
                       "or judged their decisions yet (the neutral score)")
        elif axis == "frequency" and value == FREQUENCY_BANDS[-1][1]:
            why.append(f"frequency is {value:.2f} for every agent: each has more than "
                       f"{FREQUENCY_BANDS[-2][0]:g} observations, where it tops out")
        else:
            why.append(f"{axis} is {value:.2f} for every agent")
    tail = "" if drawn else ("; so no radar is drawn (it needs axes that differ): the "
                             "table has the scores")
    return (f'<p class="note" data-k="flat-axes" data-axes="{",".join(flat)}">'
            f"{escape('; '.join(why) + tail)}.</p>")


def trend(data: ReportData, charts: ModuleType | None) -> str:
    """Section 4: composite trust per pair over time, tier bands shaded."""
    if not data.trend:
        return empty("no trust history yet: every change of a pair's scores is logged "
                     "once outcomes, feedback or reviews arrive")
    parts = ['<p class="note">Tier bands: core ≥ 0.8, strong ≥ 0.6, moderate ≥ 0.4, '
             "tentative ≥ 0.2, deprecated below.</p>"]
    for task_type, series in data.trend.items():
        parts.append(f"<h3>{escape(task_type)}</h3>")
        if charts is not None:
            parts.append(image(charts.trend_chart(series), f"trust trend of {task_type}"))
        rows = [[td(s.agent_id, left=True), td(str(len(s.composites))),
                 td(num(s.composites[0])), td(num(min(s.composites))),
                 td(num(max(s.composites))), td(num(s.composites[-1])), td(s.tiers[-1])]
                for s in series]
        parts.append(table(("agent", "changes", "first", "min", "max", "last", "tier"), rows))
    return "".join(parts)


def calibration(data: ReportData, charts: ModuleType | None) -> str:
    """Section 5: reliability of the decision confidence, ECE and Brier."""
    c = data.calibration
    if not c.with_outcome:
        logged = (f"none of the {c.decisions} logged decisions has a recorded outcome"
                  if c.decisions else "no routing decision is logged")
        return empty(f"no feedback yet: {logged}, so there is nothing to check the "
                     "router's confidence against")
    summary = (f'<p>decisions <span data-k="decisions">{c.decisions}</span> '
               f'(<span data-k="with_outcome">{c.with_outcome}</span> with outcome) · '
               f'ECE <b data-k="ece">{c.ece:.4f}</b> · Brier <b data-k="brier">{c.brier:.4f}</b>'
               f" · abstention rate {pct(c.abstention_rate)}</p>"
               '<p class="note">The numbers of <code>trustroute calibration</code>, over the '
               "whole decision log. Points on the diagonal: the stated confidence came "
               "true as often as it said.</p>")
    rows = [[td(r.label, "bucket", left=True), td(num(r.predicted), "predicted"),
             td(num(r.realised), "realised"), td(str(r.count), "count"), td(f"{r.gap:+.3f}")]
            for r in c.table]
    tab = table(("bucket", "predicted", "realised", "count", "gap"), rows, "reliability")
    pic = image(charts.reliability_chart(c), "reliability diagram") if charts else ""
    return f'{summary}<div class="pair">{pic}{tab}</div>'


def handoffs(data: ReportData, charts: ModuleType | None) -> str:
    """Section 6: hand-off rate per task type over time, pending requests, reasons."""
    h: Handoffs = data.handoffs
    why = ", ".join(f"{escape(r)}: {n}" for r, n in h.pending_reasons.most_common())
    pending = (f'<p>pending hand-offs: <b data-k="pending">{h.pending_reasons.total()}</b>'
               + (f" ({why})" if why else "") + "</p>")
    if not h.rates:
        return pending + empty("no hand-off decisions logged yet: they are written by "
                               "HandoffRunnable (see docs/handoff.md)")
    parts = [pending]
    if charts is not None:
        scale = axis_range(b.rate for buckets in h.rates.values() for b in buckets)
        parts.append(image(charts.handoff_chart(h.rates, scale), "hand-off rate over time",
                           scale))
    rows = [[td(tt, left=True), td(str(n)), td(str(moved)), td(pct(moved / n))]
            for tt, (n, moved) in h.totals.items()]
    parts.append(table(("task type", "decisions", "handed off", "rate"), rows))
    for tt, buckets in h.rates.items():
        parts.append(f'<p class="note">{escape(tt)}: {span(buckets)}: '
                     + " ".join(pct(b.rate) for b in buckets) + "</p>")
    reasons = [[td(r, left=True), td(str(n))] for r, n in h.reasons.most_common()]
    parts.append(table(("reason", "hand-offs"), reasons) if reasons
                 else empty("no decision was handed off, so there are no reasons"))
    return "".join(parts)


def feedback(data: ReportData, charts: ModuleType | None) -> str:
    """Section 7: per task type, the share of executions judged and the median delay."""
    if not any(c.judged for c in data.feedback):
        return empty("no feedback on executions yet: router.feedback(), trustroute "
                     "feedback or import-feedback give it (see docs/feedback.md)")
    rows = [[td(c.task_type, left=True), td(str(c.executions)), td(str(c.judged)),
             td(pct(c.share)), td(duration(c.median_delay_s))] for c in data.feedback]
    return table(("task type", "executions", "judged", "share", "median delay"), rows)


TITLES: dict[str, tuple[str, Callable[[ReportData, ModuleType | None], str]]] = {
    "leaderboard": ("1. Leaderboard per task type", leaderboard),
    "routing": ("2. Routing over time", routing),
    "radar": ("3. Trust radar of the top agents", radar),
    "trend": ("4. Trust trend", trend),
    "calibration": ("5. Is the router's confidence honest?", calibration),
    "handoffs": ("6. Hand-offs", handoffs),
    "feedback": ("7. Feedback", feedback),
}
SECTIONS = tuple(TITLES)  # the section ids, in page order


def render(data: ReportData, charts: ModuleType | None) -> str:
    """The whole page."""
    scope = [f"store {escape(data.store_url)}", f"{data.executions} executions read"]
    if data.task_type:
        scope.append(f"task type {escape(data.task_type)}")
    if data.since:
        scope.append(f"since {when(data.since)}")
    body = [f"<h1>trustroute report</h1><p class=\"meta\">{' · '.join(scope)} · generated "
            f"{when(data.generated_at)}</p>"]
    if charts is None:
        body.append(f'<p class="hint">matplotlib is not installed, so this report has tables '
                    f"only; for the pictures: <code>{escape(PLOT_HINT)}</code></p>")
    for key, (title, build) in TITLES.items():
        body.append(f'<section id="{key}"><h2>{escape(title)}</h2>{build(data, charts)}'
                    "</section>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>trustroute report</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")

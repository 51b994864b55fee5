"""The report's pictures as base64 PNG (matplotlib: the optional ``plot`` extra).

Each picture is a ``*_figure`` function returning the matplotlib ``Figure`` (what a test
or a notebook can inspect) and a ``*_chart`` function returning it as PNG text.

Imported only when matplotlib is installed (``trustroute.router.report.html`` catches
the ImportError and renders the tables with a hint instead).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from matplotlib.axes import Axes
from matplotlib.dates import AutoDateFormatter, AutoDateLocator, date2num
from matplotlib.figure import Figure

from trustroute.router.report.data import Bucket, RateBucket, TrendSeries
from trustroute.router.trust.calibration import CalibrationReport
from trustroute.router.trust.scores import TrustScores

DPI = 96
TIER_BANDS = (("deprecated", 0.0, 0.2, "#f4cccc"), ("tentative", 0.2, 0.4, "#fce5cd"),
              ("moderate", 0.4, 0.6, "#fff2cc"), ("strong", 0.6, 0.8, "#d9ead3"),
              ("core", 0.8, 1.0, "#b6d7a8"))


# matplotlib's dates run from year 1 to 9999, and an axis padded past either end cannot be
# drawn: times the store accepts at those ends (an import stamped 0001-01-01) are pinned
# inside this span, and the time axes have no padding.
DATE_SPAN = (date2num(datetime(1, 1, 2, tzinfo=UTC)), date2num(datetime(9999, 12, 30, tzinfo=UTC)))


#: Agents a chart draws one by one (the most used, or the most trusted); the rest are
#: summed ("N others") or left to the table beside it.
MOST_DRAWN = 8


def plain(name: str) -> str:
    """A name as matplotlib draws it literally: a ``$`` would start math markup (two of
    them in an agent id failed the whole report)."""
    return name.replace("$", r"\$")


def legend(ax: Axes, entries: Sequence[tuple[Any, str]], **options: Any) -> None:
    """A legend of exactly these (artist, label) entries, each label as given: left to
    collect them itself, matplotlib drops a label starting with ``_`` (its mark for "not
    in the legend"), so an agent named ``_fast`` was drawn but never named."""
    ax.legend([artist for artist, _ in entries], [label for _, label in entries], **options)


def date_numbers(times: Sequence[datetime]) -> list[float]:
    """``times`` as matplotlib date numbers, pinned inside ``DATE_SPAN``."""
    return [min(max(x, DATE_SPAN[0]), DATE_SPAN[1]) for x in date2num(list(times))]


def time_axis(ax: Axes) -> None:
    """Dates on the x axis (the values are ``date_numbers``), without padding."""
    ax.margins(x=0)
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(AutoDateFormatter(locator))
    ax.tick_params(axis="x", labelsize=7, rotation=30)


def png(fig: Figure) -> str:
    """The figure as base64 PNG text."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float = 7.5, height: float = 3.0) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots()


def routing_figure(buckets: Sequence[Bucket], quality_range: tuple[float, float] = (0.0, 1.0)
                   ) -> Figure:
    """Stacked share of tasks per agent per bucket (buckets of about equal task counts,
    one bar each), mean quality as a line on its own axis over ``quality_range``."""
    fig, ax = _figure()
    total: dict[str, float] = {}
    for b in buckets:
        for agent, share in b.shares.items():
            total[agent] = total.get(agent, 0.0) + share
    ranked = sorted(total, key=lambda a: (-total[a], a))
    drawn, rest = sorted(ranked[:MOST_DRAWN]), ranked[MOST_DRAWN:]
    stacks = [(plain(a), [b.shares.get(a, 0.0) for b in buckets]) for a in drawn]
    if rest:  # the long tail as one bar: 200 colours could not be told apart
        stacks.append((f"{len(rest)} others", [sum(b.shares.get(a, 0.0) for a in rest)
                                               for b in buckets]))
    xs = list(range(len(buckets)))
    bottom = [0.0] * len(buckets)
    entries = []
    for label, heights in stacks:
        entries.append((ax.bar(xs, heights, bottom=bottom, width=0.85), label))
        bottom = [lo + h for lo, h in zip(bottom, heights, strict=True)]
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of tasks")
    ax.set_xticks(xs, [f"{b.start:%H:%M:%S}" if (buckets[-1].end - buckets[0].start).days < 1
                       else f"{b.start:%m-%d}" for b in buckets], fontsize=7, rotation=30)
    quality = ax.twinx()
    quality.plot(xs, [math.nan if b.mean_quality is None else b.mean_quality for b in buckets],
                 color="black", marker="o", label="mean quality")
    quality.set_ylim(*quality_range)
    quality.set_ylabel("mean quality")
    legend(ax, entries, loc="upper left", bbox_to_anchor=(1.1, 1.0), fontsize=7)
    return fig


def radar_figure(agents: Sequence[tuple[str, TrustScores]]) -> Figure:
    """Frequency, effectiveness and human scores of each agent on three axes."""
    fig = Figure(figsize=(4.0, 3.4), layout="constrained")
    ax = fig.add_subplot(projection="polar")
    labels = ["frequency", "effectiveness", "human"]
    angles = [2 * math.pi * i / 3 for i in range(3)] + [0.0]
    entries = []
    for agent, s in agents:
        values = [s.frequency, s.effectiveness, s.human, s.frequency]
        line, = ax.plot(angles, values, marker="o")
        entries.append((line, f"{plain(agent)} ({s.composite:.2f}, {s.tier})"))
        ax.fill(angles, values, alpha=0.12)
    ax.set_xticks(angles[:3], labels, fontsize=8)
    ax.set_ylim(0, 1)
    ax.tick_params(axis="y", labelsize=6)
    legend(ax, entries, loc="upper center", bbox_to_anchor=(0.5, -0.08), fontsize=7)
    return fig


def trend_figure(series: Sequence[TrendSeries]) -> Figure:
    """Composite trust per pair over time over the shaded tier bands."""
    fig, ax = _figure()
    for name, lo, hi, colour in TIER_BANDS:
        ax.axhspan(lo, hi, color=colour, alpha=0.6, linewidth=0)
        ax.text(1.01, (lo + hi) / 2, name, transform=ax.get_yaxis_transform(), fontsize=7,
                va="center")
    latest = sorted(series, key=lambda s: (-s.composites[-1], s.agent_id))
    entries = []
    for s in latest[:MOST_DRAWN]:  # a marker on each change: one point is still drawn
        line, = ax.step(date_numbers(s.times), s.composites, where="post", marker="o",
                        markersize=3)
        entries.append((line, plain(s.agent_id)))
    if len(latest) > MOST_DRAWN:
        blank, = ax.plot([], [], " ")
        entries.append((blank, f"{len(latest) - MOST_DRAWN} more in the table"))
    moments = [t for s in series for t in date_numbers(s.times)]
    if moments and max(moments) - min(moments) < 1 / 24:  # one moment (a bulk import)
        ax.set_xlim(min(moments) - 0.5, max(moments) + 0.5)  # a day around it, not years
    ax.set_ylim(0, 1)
    ax.set_ylabel("composite trust")
    time_axis(ax)
    legend(ax, entries, loc="upper left", bbox_to_anchor=(1.12, 1.0), fontsize=7)
    return fig


def reliability_figure(report: CalibrationReport) -> Figure:
    """Realised success against stated confidence per bucket; the diagonal is honest."""
    fig, ax = _figure(4.5, 4.0)
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", label="perfectly honest")
    rows = [r for r in report.table if r.count]
    ax.plot([r.predicted for r in rows], [r.realised for r in rows], marker="o",
            label="router")
    for r in rows:
        ax.annotate(str(r.count), (r.predicted, r.realised), fontsize=6,
                    textcoords="offset points", xytext=(4, -8))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("stated confidence")
    ax.set_ylabel("realised success rate")
    ax.set_title(f"ECE {report.ece:.4f}  Brier {report.brier:.4f}", fontsize=9)
    ax.legend(loc="upper left", fontsize=7)
    return fig


def handoff_figure(rates: dict[str, list[RateBucket]],
                   y_range: tuple[float, float] = (0.0, 1.0)) -> Figure:
    """Hand-off rate per task type over time, on a y axis over ``y_range`` (scaled to
    the rates: 3-7% on a 0-1 axis looks flat)."""
    fig, ax = _figure()
    entries = []
    for task_type, buckets in rates.items():
        line, = ax.plot(date_numbers([b.start for b in buckets]),
                        [math.nan if b.rate is None else b.rate for b in buckets], marker="o")
        entries.append((line, plain(task_type)))
    ax.set_ylim(*y_range)
    ax.set_ylabel("hand-off rate")
    time_axis(ax)
    legend(ax, entries, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    return fig


# The report's pictures: each figure above as base64 PNG.

def routing_chart(buckets: Sequence[Bucket], quality_range: tuple[float, float] = (0.0, 1.0)
                  ) -> str:
    """``routing_figure`` as base64 PNG."""
    return png(routing_figure(buckets, quality_range))


def radar_chart(agents: Sequence[tuple[str, TrustScores]]) -> str:
    """``radar_figure`` as base64 PNG."""
    return png(radar_figure(agents))


def trend_chart(series: Sequence[TrendSeries]) -> str:
    """``trend_figure`` as base64 PNG."""
    return png(trend_figure(series))


def reliability_chart(report: CalibrationReport) -> str:
    """``reliability_figure`` as base64 PNG."""
    return png(reliability_figure(report))


def handoff_chart(rates: dict[str, list[RateBucket]],
                  y_range: tuple[float, float] = (0.0, 1.0)) -> str:
    """``handoff_figure`` as base64 PNG."""
    return png(handoff_figure(rates, y_range))

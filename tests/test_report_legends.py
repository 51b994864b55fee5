"""Every agent (and task type) of a report chart is in its legend, named as it is.

matplotlib leaves out of a legend any label that starts with ``_`` (its mark for "not in
the legend"), so an agent named ``_fast`` was drawn but never named. The charts are
inspected through their matplotlib figures (``*_figure``), the pictures the report embeds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure

from trustroute.router.report.charts import (
    handoff_figure,
    radar_figure,
    routing_figure,
    trend_figure,
)
from trustroute.router.report.data import Bucket, RateBucket, TrendSeries
from trustroute.router.trust.scores import Tier, TrustScores

NAMES = ["_fast", "__init__", "_", "$x$", "slow"]
START = datetime(2026, 1, 5, tzinfo=UTC)


def legend_texts(fig: Figure) -> list[str]:
    legend = fig.axes[0].get_legend()
    assert legend is not None
    return [text.get_text() for text in legend.get_texts()]


def test_routing_legend_names_every_agent() -> None:
    buckets = [Bucket(START + timedelta(hours=i), START + timedelta(hours=i + 1), 5,
                      {name: 1 / len(NAMES) for name in NAMES}, 0.5) for i in range(3)]
    shown = legend_texts(routing_figure(buckets))
    assert [text.replace("\\$", "$") for text in shown] == sorted(NAMES)


def test_radar_trend_and_handoff_legends_name_every_entry() -> None:
    scores = TrustScores(0.5, 0.6, 0.5, 0.55, Tier("moderate"))
    radar = legend_texts(radar_figure([(name, scores) for name in NAMES[:3]]))
    assert radar == [f"{name} (0.55, moderate)" for name in NAMES[:3]]
    series = [TrendSeries(name, [START, START + timedelta(days=1)], [0.3, 0.3 + n / 10],
                          ["tentative", "moderate"]) for n, name in enumerate(NAMES[:3])]
    assert sorted(legend_texts(trend_figure(series))) == sorted(NAMES[:3])
    rates = {name: [RateBucket(START, START + timedelta(days=1), 10, 1)]
             for name in NAMES[:3]}
    assert legend_texts(handoff_figure(rates)) == NAMES[:3]

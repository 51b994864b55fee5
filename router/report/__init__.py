"""``trustroute report`` / ``router.report(path)``: one self-contained HTML page of what
the router learned (``data``: gathering, ``html``: the page, ``charts``: matplotlib)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from trustroute.profiles.records import check_identifier
from trustroute.profiles.validation import quoted
from trustroute.router.report.data import Progress, ReportData, gather
from trustroute.router.report.html import PLOT_HINT, SECTIONS, load_charts, render

if TYPE_CHECKING:
    from trustroute.router.router import AgentRouter

__all__ = ["PLOT_HINT", "SECTIONS", "ReportData", "gather", "render", "write_report"]


def write_report(router: AgentRouter, path: str | Path = "report.html", *,
                 task_type: str | None = None, since: datetime | None = None,
                 progress: Progress | None = None, source: str | None = None) -> Path:
    """Write the report of ``router``'s store to ``path``; returns the path.

    ``task_type`` limits it to one task type, ``since`` limits what is drawn over time
    (the leaderboard and the calibration cover the whole store, as ``trustroute
    profiles`` and ``trustroute calibration`` do). Pictures need matplotlib
    (``pip install "trustroute[plot]"``); without it the page has the tables only.
    ``source`` is how the page names the store (default: its URL). Missing folders of
    ``path`` are made (``trustroute report --out`` refuses them instead, as a typo).
    """
    if task_type is not None:
        check_identifier(task_type, "task_type")
    if not isinstance(since, datetime | None) or (since is not None and since.tzinfo is None):
        raise TypeError(f"since must be a timezone-aware datetime or None, got {quoted(since)}")
    path = Path(path)
    data = gather(router, task_type=task_type, since=since, progress=progress, source=source)
    text = render(data, load_charts())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path

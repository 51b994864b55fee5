"""Regret curves of a replay as a PNG.

matplotlib is an optional extra (``trustroute[plot]``), so this module is imported only
to plot; ``trustroute replay --plot`` checks that it is installed before replaying.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from trustroute.router.replay.runner import ReplayReport


def plot_regret(report: ReplayReport, path: str | Path) -> Path:
    """Draw every strategy's mean cumulative regret (band: +-1 sd across runs)."""
    path = Path(path)
    fig = Figure(figsize=(8.0, 5.0), layout="constrained")
    ax = fig.subplots()
    for label, summary in report.summaries.items():
        curves = np.vstack([r.regret for r in summary.runs])
        mean, sd = curves.mean(axis=0), curves.std(axis=0)
        steps = np.arange(1, len(mean) + 1)
        pct = summary.pct_oracle["mean"]
        (line,) = ax.plot(steps, mean, label=f"{label} ({pct:.1f}% of oracle)")
        ax.fill_between(steps, mean - sd, mean + sd, color=line.get_color(), alpha=0.15)
    drift_steps = {r.plan.drift_step for rs in report.results.values() for r in rs
                   if r.plan.drift_step is not None}
    for step in sorted(drift_steps):
        ax.axvline(step, color="grey", linestyle="--", linewidth=1)
        ax.text(step, ax.get_ylim()[1] * 0.95, " regression", color="grey", va="top")
    settings = report.settings
    ax.set_title(f"{settings['runs']} runs, {settings['agents']} agents"
                 + (", drift" if settings["drift"] else ""))
    ax.set_xlabel("tasks routed")
    ax.set_ylabel("cumulative regret vs per-task-type oracle")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path

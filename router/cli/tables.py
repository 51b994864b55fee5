"""Rich tables for what the CLI shows: decisions, profiles and the demo leaderboard.

Rendering only; the numbers come from the library. Kept in one place so every command
formats scores, latencies, times and counts the same way.

Every table fits an 80-column terminal without cutting a header or a number: number
columns are never narrower than their header and never wrap, and name columns (agents,
task types) take what is left, folding a long name onto a second line rather than
cutting it. In a narrower terminal ``fitted`` leaves out the rightmost columns, and says
which, rather than cut names or numbers.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table

from trustroute.profiles.profile import TaskTypeProfile
from trustroute.profiles.records import utc_now
from trustroute.router.cli.text import shown
from trustroute.router.decision import RoutingDecision
from trustroute.router.demo.summary import LeaderboardRow, Preference


def num(value: float | None, digits: int = 3) -> str:
    """A score with fixed decimals; an em dash when unknown (None, or NaN: a mean over
    nothing)."""
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def pct(value: float) -> str:
    """A fraction as a whole percentage."""
    return f"{100.0 * value:.0f}%"


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``, ``1,000 runs``."""
    return f"{count:,} {noun if count == 1 else noun + 's'}"


def duration(milliseconds: float) -> str:
    """A latency in the unit that suits it: ``0.4 ms``, ``2 ms``, ``350 ms``, ``1.2 s``,
    ``4.5 min``, ``2.0 h``; an em dash when not finite (a store written before latencies
    were bounded may hold a mean that overflowed)."""
    if not math.isfinite(milliseconds):
        return "—"
    ms = max(0.0, milliseconds)
    if ms < 1:
        return "0 ms" if ms == 0 else f"{ms:.1f} ms"
    if ms < 999.5:
        return f"{ms:.0f} ms"
    if ms < 59_950:
        return f"{ms / 1000:.1f} s"
    if ms < 3_597_000:
        return f"{ms / 60_000:.1f} min"
    hours = ms / 3_600_000
    return f"{hours:.1f} h" if hours < 99.95 else f"{hours:,.0f} h"


def age(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago, compactly: ``45s``, ``12m``, ``3h``, ``5d`` (``—`` when never)."""
    if moment is None:
        return "—"
    seconds = max(0.0, ((now or utc_now()) - moment).total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


NAME_COLUMNS = frozenset({"agent", "task type"})


def compact_table(headers: Iterable[str], names: Collection[str] = NAME_COLUMNS,
                  **options: Any) -> Table:
    """A table without padding or edges: numbers right-aligned, never wrapped and never
    narrower than their header (a header may be given on two lines, ``"mean\\nquality"``);
    the ``names`` columns on the left, folded when long."""
    table = Table(title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False,
                  show_edge=False, **options)
    for header in headers:
        if header in names:  # "task type" may wrap to two lines, a word is never cut
            table.add_column(header, justify="left", overflow="fold",
                             min_width=max(len(word) for word in header.split()))
        else:
            table.add_column(header, justify="right", no_wrap=True,
                             min_width=max(len(line) for line in header.splitlines()))
    return table


#: Below this, a name column is not folded narrower: number columns are left out instead.
NAME_WIDTH = 12


def fitted(table: Table, console: Console, text: int | None = None) -> Table:
    """``table`` as it fits ``console``'s width: while even its narrowest rendering is
    wider, its rightmost column is left out (the caption names them; ``--json`` has
    everything), so the first columns, names among them, are never cut. Then the
    folding columns are narrowed as far as needed (``_shrink``). ``text``: the index of
    a column of free text (a folding one), which gives up width first, down to
    NAME_WIDTH, so that the names keep theirs; it wraps between words."""
    for column in table.columns:  # names fold, though not narrower than NAME_WIDTH
        if column.overflow == "fold":
            widest = max((Measurement.get(console, console.options, cell).maximum
                          for cell in column.cells), default=0)
            column.min_width = max(column.min_width or 0, min(NAME_WIDTH, widest))
    first = table.columns[text] if text is not None else None
    dropped: list[str] = []
    while len(table.columns) > 2 and _narrowest(table, console) > console.width:
        dropped.insert(0, str(table.columns.pop().header).replace("\n", " "))
    _shrink(table, console, first)
    if dropped:
        note = f"not shown at this width: {', '.join(dropped)} (--json has them)"
        table.caption = f"{table.caption}\n{note}" if table.caption else note
        table.caption_justify = "left"
    return table


def _shrink(table: Table, console: Console, first: Column | None) -> None:
    """Give the folding columns widths (``max_width``) with which the table fits the
    console: ``first`` gives up width first, then the widest, one character at a time,
    none under its ``min_width``. Left to rich, a table too wide is narrowed column by
    column without regard to ``min_width`` and then widened back to it, so the table
    ends up wider than the terminal and its rightmost header is cut."""
    wide = console.options.update_width(1_000_000)
    excess = Measurement.get(console, wide, table).maximum - console.width
    folding = [c for c in table.columns if c.overflow == "fold"]
    widths = [min(max(Measurement.get(console, wide, cell).maximum
                      for cell in [c.header, *c.cells]), c.max_width or 1_000_000)
              for c in folding]
    while excess > 0:
        room = [i for i, c in enumerate(folding) if widths[i] > (c.min_width or 1)]
        if not room:
            break
        pick = next((i for i in room if folding[i] is first),
                    max(room, key=lambda i: widths[i]))
        widths[pick] -= 1
        excess -= 1
    for column, width in zip(folding, widths, strict=True):
        column.max_width = width


def _narrowest(table: Table, console: Console) -> int:
    """The width of ``table`` with its name columns folded as narrow as they go."""
    names = [c for c in table.columns if c.overflow == "fold"]
    widths = [c.max_width for c in names]
    for column in names:
        column.max_width = column.min_width
    try:
        wide = console.options.update_width(1_000_000)
        return Measurement.get(console, wide, table).minimum
    finally:
        for column, width in zip(names, widths, strict=True):
            column.max_width = width


def decision_table(decision: RoutingDecision) -> Table:
    """Every candidate of a decision, best first, with its score components.

    Reasons are long sentences, so ``trustroute route`` lists them under the table rather
    than squeezing them into a column.
    """
    table = compact_table(("#", "agent", "final", "strategy", "expertise", "conf.",
                           "adjusted", "runs", "load"),
                          title=f"candidates for {shown(decision.task_type)}")
    for rank, c in enumerate(decision.candidates, start=1):
        name = shown(c.agent_id)
        table.add_row(str(rank), f"[bold green]{name}[/]" if c.agent_id == decision.agent_id
                      else name, num(c.final_score), num(c.score), num(c.expertise),
                      num(c.confidence, 2), num(c.adjusted_score), str(c.executions),
                      num(c.load, 2))
    return table


PROFILES_LEGEND = ("quality: mean; expertise: recency-weighted quality; conf.: min(1, runs / "
                   "ramp); adjusted: expertise x conf.; latency: mean; updated: last "
                   "execution (--json for exact times)")
#: The agent column of every profiles table is as wide as the longest name up to this, so
#: the tables of one listing line up; 16 keeps the table within 80 columns.
AGENT_WIDTH = 16


def profiles_tables(profiles: Iterable[TaskTypeProfile]) -> list[Table]:
    """One table per task type (titled with it, in the order given), one row per agent.

    The task type is the title rather than a column, so the table fits 80 columns.
    """
    groups: dict[str, list[TaskTypeProfile]] = {}
    for p in profiles:
        groups.setdefault(p.task_type, []).append(p)
    width = min(AGENT_WIDTH, max((len(p.agent_id) for g in groups.values() for p in g),
                                 default=5))
    now = utc_now()
    tables = []
    for task_type, rows in groups.items():
        table = compact_table(("agent", "runs", "success", "quality", "expertise", "conf.",
                               "adjusted", "latency", "updated"),
                              title=f"[bold]{shown(task_type)}[/]")
        table.columns[0].min_width = width
        for p in rows:
            table.add_row(shown(p.agent_id), str(p.executions_total), pct(p.success_rate),
                          num(p.avg_quality, 2), num(p.expertise, 2),
                          num(p.confidence, 2), num(p.adjusted_score, 2),
                          duration(p.avg_latency_ms), age(p.last_updated, now))
        if waiting := [p for p in rows if p.pending]:
            table.caption = "awaiting a verdict, not in quality yet: " + ", ".join(
                f"{shown(p.agent_id)} {p.pending:,}" for p in waiting)
            table.caption_justify = "left"
        tables.append(table)
    return tables


LEADERBOARD_LEGEND = ("routed: tasks sent to the agent in this run (share); quality: mean "
                      "observed on them; hidden: its true skill (★ = best); runs, expertise, "
                      "confidence, adjusted: its learned profile")


def leaderboard_heading(task_type: str, rows: list[LeaderboardRow],
                        preferred: Preference | None) -> str:
    """The line above a task type's leaderboard: where routing settled, and the truth."""
    best = next((r.agent_id for r in rows if r.is_best), "?")
    heading = f"[bold]{shown(task_type)}[/]"
    if preferred is None:
        return heading
    mark = "[green]✓[/]" if preferred.is_best else "[yellow]✗[/]"
    return (f"{heading}: settled on {shown(preferred.agent_id)} ({pct(preferred.share)} of "
            f"its last {plural(preferred.tasks, 'task')}); hidden best {shown(best)} {mark}")


def leaderboard_table(rows: list[LeaderboardRow]) -> Table:
    """The demo's leaderboard for one task type; the truly best agent is starred."""
    table = compact_table(("#", "agent", "routed", "quality", "hidden", "runs", "expertise",
                           "conf.", "adjusted"))
    for r in rows:
        name = shown(r.agent_id) + (" ★" if r.is_best else "")
        table.add_row(str(r.rank), f"[bold]{name}[/]" if r.rank == 1 else name,
                      f"{r.routed} ({pct(r.share)})", num(r.observed_quality, 2),
                      num(r.hidden_skill, 2), str(r.runs), num(r.expertise, 2),
                      num(r.confidence, 2), num(r.adjusted_score, 2))
    return table

"""OutcomeLog: a full-information outcome log, loaded from CSV or JSONL.

Every row says how one agent did on one task: ``agent, task_type, task, quality`` and
optionally ``cost`` and ``latency_ms``. Because (ideally) every agent was tried on every
task, a routing policy can be replayed on the log exactly: ask the router, reveal only
the chosen agent's row. The log is held as dense matrices (tasks x agents, NaN where an
agent has no row for a task) so a replay costs array lookups, not searches.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustroute.profiles.records import check_identifier
from trustroute.router.row_files import RowFileError, csv_rows, jsonl_rows, text_cell

REQUIRED_COLUMNS = ("agent", "task_type", "task", "quality")
OPTIONAL_COLUMNS = ("cost", "latency_ms")


class OutcomeLogError(ValueError):
    """A log file that cannot be replayed; the message names the file, line and field."""


@dataclass(frozen=True)
class OutcomeLog:
    """Outcomes of every agent on every task (NaN where a row is missing)."""

    agents: tuple[str, ...]
    tasks: tuple[str, ...]
    task_types: tuple[str, ...]  # the task type of each task, aligned with ``tasks``
    quality: np.ndarray  # (tasks, agents)
    cost: np.ndarray | None = None  # (tasks, agents) or None when no row had a cost
    latency_ms: np.ndarray | None = None

    @property
    def types(self) -> list[str]:
        """Distinct task types, sorted."""
        return sorted(set(self.task_types))

    def type_index(self) -> np.ndarray:
        """Per task, the index of its task type in ``types``."""
        lookup = {t: i for i, t in enumerate(self.types)}
        return np.array([lookup[t] for t in self.task_types], dtype=np.int64)

    def agent_means(self) -> np.ndarray:
        """Mean quality of each agent over the tasks it has a row for."""
        return np.nanmean(self.quality, axis=0)

    def type_means(self) -> np.ndarray:
        """(types, agents) mean quality per task type, NaN where an agent has no row."""
        index = self.type_index()
        with warnings.catch_warnings():  # an agent without a row of a type: NaN, silently
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.array([np.nanmean(self.quality[index == k], axis=0)
                             for k in range(len(self.types))])

    def summary(self) -> dict[str, Any]:
        """Sizes, for reports."""
        return {"agents": len(self.agents), "tasks": len(self.tasks),
                "task_types": len(self.types),
                "rows": int(np.sum(~np.isnan(self.quality)))}


def load_outcomes(path: str | Path) -> OutcomeLog:
    """Read a CSV (header row) or JSONL (one object per line) outcome log."""
    path = Path(path)
    if not path.exists():
        raise OutcomeLogError(f"{path}: no such file")
    suffix = path.suffix.lower()
    rows: Iterator[tuple[int, Mapping[str, Any]]]
    if suffix in (".jsonl", ".ndjson", ".json"):
        rows = jsonl_rows(path)
    elif suffix in (".csv", ".tsv", ".txt"):
        rows = csv_rows(path, delimiter="\t" if suffix == ".tsv" else ",",
                        check_header=_check_header)
    else:
        raise OutcomeLogError(f"{path}: unknown format {suffix!r}; use .csv or .jsonl")
    try:
        return outcomes_from_rows(rows, source=str(path))
    except RowFileError as exc:
        raise OutcomeLogError(str(exc)) from None


def outcomes_from_rows(rows: Iterator[tuple[int, Mapping[str, Any]]] | list[Mapping[str, Any]],
                       source: str = "<rows>") -> OutcomeLog:
    """Build a log from ``(line, row)`` pairs or plain row mappings (validated)."""
    agents: dict[str, int] = {}
    tasks: dict[str, int] = {}
    task_types: list[str] = []
    cells: dict[tuple[int, int], tuple[float, ...]] = {}
    for item in rows:
        line, row = item if isinstance(item, tuple) else (0, item)
        where = f"{source}:{line}" if line else source
        missing = [c for c in REQUIRED_COLUMNS if row.get(c) in (None, "")]
        if missing:
            raise OutcomeLogError(f"{where}: missing {', '.join(missing)}")
        try:
            agent, task, task_type = (text_cell(row[c], c) for c in ("agent", "task",
                                                                      "task_type"))
        except ValueError as exc:
            raise OutcomeLogError(f"{where}: {exc}") from None
        for name, value in (("agent", agent), ("task_type", task_type)):
            try:  # what the router would refuse, refused here at its line
                check_identifier(value, name)
            except ValueError as exc:
                raise OutcomeLogError(f"{where}: {name}: {exc}") from None
        values = (_number(row["quality"], "quality", where, 0.0, 1.0),
                  *(math.nan if row.get(name) in (None, "") else
                    _number(row[name], name, where, 0.0, None) for name in OPTIONAL_COLUMNS))
        a = agents.setdefault(agent, len(agents))
        t = tasks.get(task)
        if t is None:
            t = tasks[task] = len(tasks)
            task_types.append(task_type)
        elif task_types[t] != task_type:
            raise OutcomeLogError(f"{where}: task {task!r} has task_type {task_type!r} "
                                  f"but earlier rows say {task_types[t]!r}")
        if (t, a) in cells:
            raise OutcomeLogError(f"{where}: a second row for agent {agent!r} on task {task!r}")
        cells[(t, a)] = values
    if not cells:
        raise OutcomeLogError(f"{source}: no outcome rows")
    quality, cost, latency = (np.full((len(tasks), len(agents)), np.nan) for _ in range(3))
    for (t, a), values in cells.items():
        quality[t, a], cost[t, a], latency[t, a] = values
    return OutcomeLog(  # cost and latency only when some row has them
        agents=tuple(agents), tasks=tuple(tasks), task_types=tuple(task_types),
        quality=quality, cost=None if np.isnan(cost).all() else cost,
        latency_ms=None if np.isnan(latency).all() else latency)


def _number(value: Any, name: str, where: str, low: float, high: float | None) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise OutcomeLogError(f"{where}: {name} must be a number, got {value!r}") from None
    except OverflowError:  # an integer past the largest float: out of any range
        number = math.inf
    if not math.isfinite(number) or number < low or (high is not None and number > high):
        bounds = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        got = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:24]}... (too large)"
        raise OutcomeLogError(f"{where}: {name} must be {bounds}, got {got}")
    return number


def _check_header(header: Sequence[str]) -> None:
    absent = [c for c in REQUIRED_COLUMNS if c not in header]
    if absent:
        raise ValueError(f"header lacks column(s) {', '.join(absent)} "
                         f"(found: {', '.join(header) or 'nothing'})")

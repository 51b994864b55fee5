"""Learning from late, partial feedback: replays where only some outcomes are judged.

Replays the development log ``../shared/data/alpaca_eval_gpt4/outcomes.csv`` with 8
random agents per run (the same runs for every strategy and setting). Each outcome is
judged with probability ``rate`` (the same draws for every strategy) and reaches the
router ``delay`` tasks later as ``router.feedback`` on an execution recorded pending when
it was decided; the rest never do (``replay(feedback_rate=...,
feedback_delay=...)``, ``trustroute replay --feedback-rate --feedback-delay``). "no
feedback" judges nothing: the router can only route at random.

Targets (issue 20): at (0.25, 100) and (0.1, 100) the default strategy is at least level
with ε-greedy (ε = 0.05, pooled like the default) on the same runs; at (1.0, 0) it keeps
>= 95 % of the per-task-type oracle. Run: ``python -m benchmarks replay_feedback``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from trustroute.router.replay import StrategySpec, load_outcomes, replay, run_metrics

console = Console()

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alpaca_eval_gpt4" / \
    "outcomes.csv"
RUNS, AGENTS = 10, 8
DEFAULT = StrategySpec("knowledge_gradient (default)", "knowledge_gradient")
EPSILON = StrategySpec("epsilon_greedy 0.05", "epsilon_greedy")
PREVIOUS = StrategySpec("thompson (previous)", "thompson")
SETTINGS: tuple[tuple[float, int], ...] = ((1.0, 0), (0.25, 0), (0.25, 100), (0.1, 100), (0.0, 0))


def main() -> None:
    if not DATA.exists():
        console.print(f"[yellow]skipped:[/yellow] {DATA} not found")
        return
    jobs = max(1, min(2, os.cpu_count() or 1))
    log = load_outcomes(DATA)
    specs = [DEFAULT, EPSILON, PREVIOUS]
    table = Table(title=f"late, partial feedback: development log, {AGENTS} agents, {RUNS} "
                        "runs, % of per-task-type oracle",
                  caption="judged: share of outcomes judged; late: tasks until a verdict "
                          "arrives; target: default >= 95 at (1.0, 0), >= epsilon_greedy "
                          "at (0.25, 100) and (0.1, 100)")
    for column in ("judged", "late", "default", "eps-greedy", "thompson", "target"):
        table.add_column(column, justify="right")
    for rate, delay in SETTINGS:
        with console.status(f"replaying: {rate:.0%} judged, {delay} tasks late ..."):
            report = replay(log, specs, runs=RUNS, seed=0, agents=AGENTS, jobs=jobs,
                            feedback_rate=rate, feedback_delay=delay)
        pct = {s.label: float(np.mean([run_metrics(r).pct_oracle
                                       for r in report.results[s.label]])) for s in specs}
        ours, eps = pct[DEFAULT.label], pct[EPSILON.label]
        if rate == 1.0 and delay == 0:
            verdict = "PASS" if ours >= 95.0 else "MISS"
        elif delay == 100:
            verdict = "PASS" if ours >= eps else "MISS"
        else:
            verdict = ""
        colour = {"PASS": "green", "MISS": "red"}.get(verdict)
        table.add_row("none" if rate == 0 else f"{rate:.2f}", str(delay), f"{ours:.1f}",
                      f"{eps:.1f}", f"{pct[PREVIOUS.label]:.1f}",
                      f"[{colour}]{verdict}[/{colour}]" if colour else "")
    console.print(table)


if __name__ == "__main__":
    main()

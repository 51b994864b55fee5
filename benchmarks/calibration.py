"""Is ``decision.confidence`` honest? Replay a real outcome log through select/record.

Streams ``../shared/data/alpaca_eval_gpt4/outcomes.csv`` through real routers (default
strategy, default trust settings, in-memory store) with the learning issue's replay
engine: success means quality >= 0.5, as in every replay. Over the second half of each
stream (the first half is where the router and its calibration map learn) it reports
the expected calibration error (10 equal-width buckets) of the calibrated confidence,
next to the same figure for the strategy's raw success probability measured on the same
decisions, plus the Brier score, the reliability table, the abstention rate and how
often abstained decisions failed. Target: ECE <= 0.05.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from trustroute.router.cli.trust import print_calibration
from trustroute.router.replay import ReplayStep, load_outcomes, make_plans, replay_run
from trustroute.router.replay.plan import RunPlan
from trustroute.router.router import AgentRouter
from trustroute.router.stats import brier_score, expected_calibration_error
from trustroute.router.strategies import DEFAULT_STRATEGY
from trustroute.router.trust.calibration import calibration_report

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alpaca_eval_gpt4" / \
    "outcomes.csv"
TARGET_ECE = 0.05
console = Console(width=80)
SCENARIOS: tuple[tuple[str, int | None, int], ...] = (  # label, agents per run, runs
    ("8 random agents", 8, 8),
    ("all 53 agents", None, 2),
)


@dataclass
class Scenario:
    """The second-half decisions of every run of one scenario."""

    label: str
    confidence: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    success: list[bool] = field(default_factory=list)
    abstained: list[bool] = field(default_factory=list)
    per_run_ece: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _run(plan: RunPlan, into: Scenario) -> None:
    routers: list[AgentRouter] = []

    def factory(p: RunPlan) -> AgentRouter:
        routers.append(AgentRouter(agents=list(p.agents), store="mem://", seed=p.seed,
                                   strategy=DEFAULT_STRATEGY))
        return routers[-1]

    steps: list[tuple[float, float, bool, bool]] = []

    def observe(step: ReplayStep) -> None:
        d = step.decision
        raw = routers[-1].trust_layer.decisions.predicted(d.decision_id)
        assert d.confidence is not None and raw is not None
        steps.append((d.confidence, raw, step.success, d.abstained))

    replay_run(plan, factory, observer=observe)
    second = steps[len(steps) // 2:]
    into.per_run_ece.append(expected_calibration_error([s[0] for s in second],
                                                       [s[2] for s in second]))
    for conf, raw, ok, abstained in second:
        into.confidence.append(conf)
        into.raw.append(raw)
        into.success.append(ok)
        into.abstained.append(abstained)


def summary_table(results: list[Scenario]) -> Table:
    """One column per scenario: ECE and Brier score, raw and calibrated (fits 80 columns)."""
    table = Table(title=f"calibration of decision.confidence, strategy {DEFAULT_STRATEGY!r}, "
                        f"second half of each stream of {DATA.parent.name} (success = "
                        "quality >= 0.5)", box=box.SIMPLE_HEAD)
    table.add_column("measure")
    for s in results:
        table.add_column(s.label, justify="right")
    rows: list[tuple[str, Callable[[Scenario], str]]] = [
        ("decisions", lambda s: f"{len(s.confidence)}"),
        ("ECE, raw success probability",
         lambda s: f"{expected_calibration_error(s.raw, s.success):.4f}"),
        ("ECE, calibrated confidence",
         lambda s: f"{expected_calibration_error(s.confidence, s.success):.4f}"),
        ("  per run: mean", lambda s: f"{sum(s.per_run_ece) / len(s.per_run_ece):.4f}"),
        ("  per run: max", lambda s: f"{max(s.per_run_ece):.4f}"),
        ("Brier, raw", lambda s: f"{brier_score(s.raw, s.success):.4f}"),
        ("Brier, calibrated", lambda s: f"{brier_score(s.confidence, s.success):.4f}"),
        (f"target: ECE <= {TARGET_ECE}",
         lambda s: "met" if expected_calibration_error(s.confidence, s.success) <= TARGET_ECE
         else "[red]MISSED[/red]"),
    ]
    for label, value in rows:
        table.add_row(label, *(value(s) for s in results))
    return table


def main() -> None:
    """Replay each scenario and print calibration figures with the reliability table."""
    if not DATA.exists():
        print(f"skipped: {DATA} not found")
        return
    log = load_outcomes(DATA)
    results = []
    for label, agents, runs in SCENARIOS:
        scenario = Scenario(label)
        started = time.perf_counter()
        for plan in make_plans(log, runs=runs, seed=0, agents=agents):
            _run(plan, scenario)
        scenario.seconds = time.perf_counter() - started
        results.append(scenario)
        print(f"  {label}: {runs} run(s) in {scenario.seconds:.1f} s", flush=True)
    console.print()
    console.print(summary_table(results))
    for s in results:
        report = calibration_report(zip(s.confidence, s.success, s.abstained, strict=True))
        print()
        print_calibration(report, f"reliability, {s.label} (pooled second halves)")

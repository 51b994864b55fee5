"""``replay()``: compare strategies on an outcome log, side by side, as a Python API.

    from trustroute.router.replay import load_outcomes, replay
    report = replay(load_outcomes("outcomes.csv"), ["thompson", "random"], runs=20, agents=8)
    report.summaries["thompson"].pct_oracle["mean"]

Each strategy replays the same plans (see ``plan``). ``jobs > 1`` spreads runs over
processes (each with its own in-memory store); ``observer`` sees every decision with its
outcome (e.g. to measure the calibration of ``decision.confidence``); ``router_factory``
builds a custom router per plan instead of the named strategy's default one (with late,
partial feedback its router needs a feedback policy with ``wait_s > 0``: build it with
``strategy_router(name, params, Feedback(rate, delay))`` or pass ``Feedback.policy``).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from trustroute.router.replay.log import OutcomeLog
from trustroute.router.replay.loop import (
    Feedback,
    RouterFactory,
    RunResult,
    StepObserver,
    replay_run,
    strategy_router,
)
from trustroute.router.replay.metrics import StrategySummary, run_metrics
from trustroute.router.replay.plan import RunPlan, make_plans

Progress = Callable[[int], None]  # called with a number of steps just completed


@dataclass(frozen=True)
class StrategySpec:
    """A strategy to replay: a label for reports, a registered name and its params."""

    label: str
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, item: str | StrategySpec | tuple[str, str, Mapping[str, Any]],
           params: Mapping[str, Mapping[str, Any]] | None = None) -> StrategySpec:
        """Normalise a name, a spec or a ``(label, name, params)`` tuple."""
        if isinstance(item, StrategySpec):
            return item
        if isinstance(item, tuple):
            return cls(*item)
        return cls(item, item, dict((params or {}).get(item, {})))


@dataclass
class ReplayReport:
    """Every strategy's summary, plus the settings that produced them."""

    settings: dict[str, Any]
    summaries: dict[str, StrategySummary]
    results: dict[str, list[RunResult]]

    def as_dict(self, curve_points: int = 50) -> dict[str, Any]:
        """JSON-ready form."""
        return {"settings": self.settings,
                "strategies": [s.as_dict(curve_points) for s in self.summaries.values()]}


def replay(log: OutcomeLog, strategies: Sequence[str | StrategySpec | tuple[str, str, Any]],
           *, runs: int = 20, seed: int = 0, agents: int | None = None, drift: bool = False,
           strategy_params: Mapping[str, Mapping[str, Any]] | None = None,
           success_threshold: float = 0.5, jobs: int = 1, progress: Progress | None = None,
           observer: StepObserver | None = None,
           router_factory: Callable[[StrategySpec], RouterFactory] | None = None,
           feedback_rate: float = 1.0, feedback_delay: int = 0,
           ) -> ReplayReport:
    """Replay ``log`` ``runs`` times per strategy and summarise (see module docs).

    ``feedback_rate``: the share of outcomes judged (each with that probability, the
    same draws for every strategy); ``feedback_delay``: how many tasks later a judged
    outcome reaches the router, as ``router.feedback`` on an execution recorded pending
    at decision time. The rest are never judged.
    """
    feedback = Feedback(float(feedback_rate), int(feedback_delay))
    if isinstance(strategies, str):  # one name, not its letters
        raise TypeError(f"strategies must be a list, not the string {strategies!r}; "
                        f"e.g. [{strategies!r}]")
    specs = [StrategySpec.of(s, strategy_params) for s in strategies]
    if not specs:
        raise ValueError("name at least one strategy to replay")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"strategy labels must be distinct, got {', '.join(labels)}")
    if stray := sorted(set(strategy_params or {}) - {s.name for s in specs} - set(labels)):
        raise ValueError(f"strategy_params names {', '.join(map(repr, stray))}, which is not "
                         f"among the replayed strategies ({', '.join(labels)})")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number >= 1, got {jobs!r}")
    if not 0.0 <= success_threshold <= 1.0:
        raise ValueError(f"success_threshold must be in [0, 1], got {success_threshold}")
    if jobs > 1 and (observer is not None or router_factory is not None):
        raise ValueError("observer and router_factory need jobs=1 (they run in this process)")
    plans = make_plans(log, runs=runs, seed=seed, agents=agents, drift=drift)
    for spec in specs:  # fail fast on an unknown strategy or bad parameters, before any run
        strategy_router(spec.name, spec.params)(plans[0]).close()
    tasks = [(spec, plan) for spec in specs for plan in plans]
    results: dict[str, list[RunResult]] = {s.label: [] for s in specs}
    if jobs > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = [pool.submit(_run_remote, spec, plan, success_threshold, feedback)
                       for spec, plan in tasks]
            for future in futures:
                result = future.result()
                results[result.strategy].append(result)
                if progress is not None:
                    progress(result.plan.steps)
    else:
        tick = (lambda: progress(1)) if progress is not None else None
        for spec, plan in tasks:
            factory = (router_factory(spec) if router_factory is not None
                       else strategy_router(spec.name, spec.params, feedback))
            results[spec.label].append(replay_run(
                plan, factory, label=spec.label, success_threshold=success_threshold,
                observer=observer, on_step=tick, feedback=feedback))
    summaries = {label: StrategySummary(label, [run_metrics(r) for r in done],
                                        sum(r.seconds for r in done))
                 for label, done in results.items()}
    settings = {"runs": runs, "seed": seed, "agents": agents or len(log.agents),
                "drift": drift, "success_threshold": success_threshold,
                "feedback_rate": feedback.rate, "feedback_delay": feedback.delay,
                "log": log.summary(),
                "strategies": [{"label": s.label, "name": s.name, "params": dict(s.params)}
                               for s in specs]}
    return ReplayReport(settings, summaries, results)


def total_steps(log: OutcomeLog, strategies: int, runs: int) -> int:
    """Decisions a replay will make (for progress bars)."""
    return len(log.tasks) * strategies * runs


def _run_remote(spec: StrategySpec, plan: RunPlan, success_threshold: float,
                feedback: Feedback) -> RunResult:
    """Worker-process entry: one run of one strategy."""
    return replay_run(plan, strategy_router(spec.name, spec.params, feedback),
                      label=spec.label,
                      success_threshold=success_threshold, feedback=feedback)

"""``trustroute record AGENT TASK_TYPE --success/--failure``: log one outcome by hand."""

from __future__ import annotations

import warnings
from pathlib import Path

import click

from trustroute.profiles.store import DuplicateRecord
from trustroute.router.cli.base import (
    cli,
    console,
    exclusive,
    json_option,
    open_router,
    print_json,
    router_options,
)
from trustroute.router.cli.hints import new_task_type_hint
from trustroute.router.cli.tables import duration, num, plural
from trustroute.router.cli.text import shown
from trustroute.router.recording import as_judged, build_record


@cli.command()
@click.argument("agent")
@click.argument("task_type")
@click.option("--success", is_flag=True, help="It went well (this or --failure is required).")
@click.option("--failure", is_flag=True, help="It went badly.")
@click.option("--quality", "-q", type=float, default=None,
              help="Quality in [0, 1]; default 1.0 on success, 0.0 on failure.")
@click.option("--latency-ms", type=float, default=0.0, show_default=True,
              help="How long the execution took, in milliseconds.")
@click.option("--cost", type=float, default=None,
              help="What it cost; default the agent's cost_per_call from the config.")
@click.option("--record-id", default=None, metavar="ID",
              help="Idempotency key: recording the same id twice stores it once.")
@click.option("--decision-id", default=None, metavar="ID",
              help="The decision this execution followed, if any.")
@router_options
@json_option
def record(agent: str, task_type: str, success: bool, failure: bool, quality: float | None,
           latency_ms: float, cost: float | None, record_id: str | None,
           decision_id: str | None, config: Path | None, store: str | None,
           as_json: bool) -> None:
    """Record that AGENT handled a task of TASK_TYPE, and how it went.

    The profile of (AGENT, TASK_TYPE) is updated in the store at once; the updated
    profile is printed.
    """
    if exclusive(success=success, failure=failure) is None:
        raise click.UsageError("say how it went: --success or --failure",
                               ctx=click.get_current_context())
    with open_router(config, store) as router:
        if hint := new_task_type_hint(router, task_type):
            warnings.warn(f"task type {task_type!r} has no outcomes yet{hint}; recording "
                          "it as a new task type", stacklevel=1)
        rec = build_record(None, router.agents, agent_id=agent, task_type=task_type,
                           success=success, quality=quality, latency_ms=latency_ms, cost=cost,
                           record_id=record_id, decision_id=decision_id)
        try:
            rec = router.record(rec)  # its quality as counted: None while awaiting a verdict
            stored = True
        except DuplicateRecord:  # a retry of a stored id: done already; show what is stored
            stored = False
            found = router.store.executions.stored([rec.record_id]).get(rec.record_id)
            if found is not None:  # None: archived by a retirement
                rec = as_judged(found.record,
                                router.projection.feedback.quality_of(rec.record_id))
        profile = router.profile(agent, task_type)
        run = router.projection.feedback.run(rec.record_id)  # as the router placed it
        awaiting = run is not None and run.pending  # no quality yet (docs/feedback.md)
    if as_json:
        print_json({"stored": stored, "awaiting_verdict": awaiting,
                    "record": rec.model_dump(mode="json"),
                    "profile": profile.model_dump(mode="json")})
        return
    if not stored:
        console.print(f"record {shown(rec.record_id)} was already stored; nothing changed")
    else:
        outcome = "[green]success[/]" if rec.success else "[red]failure[/]"
        given = ("awaiting a verdict" if awaiting else "no quality" if rec.quality is None
                 else f"quality {num(rec.quality, 2)}")
        console.print(f"recorded {shown(agent)} on {shown(task_type)}: {outcome}, {given}, "
                      f"{duration(rec.latency_ms)}")
    waiting = f", {profile.pending:,} awaiting a verdict" if profile.pending else ""
    console.print(f"profile: {plural(profile.executions_total, 'run')}{waiting}, success "
                  f"{100 * profile.success_rate:.0f}%, expertise {num(profile.expertise)}, "
                  f"confidence {num(profile.confidence, 2)}, adjusted "
                  f"{num(profile.adjusted_score)}")

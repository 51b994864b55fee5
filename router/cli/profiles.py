"""``trustroute profiles``: what has been learned about each (agent, task type)."""

from __future__ import annotations

from pathlib import Path

import click

from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.cli.base import (
    cli,
    console,
    json_option,
    open_reader,
    print_json,
    router_options,
    store_label,
)
from trustroute.router.cli.handoff import stats_table
from trustroute.router.cli.hints import new_task_type_hint
from trustroute.router.cli.tables import PROFILES_LEGEND, fitted, profiles_tables
from trustroute.router.cli.text import shown
from trustroute.router.errors import did_you_mean


@cli.command(name="profiles")
@click.option("--task-type", "-t", default=None, metavar="T", help="Only this task type.")
@click.option("--agent", "-a", default=None, metavar="ID", help="Only this agent.")
@router_options
@json_option
def show_profiles(task_type: str | None, agent: str | None, config: Path | None,
                  store: str | None, as_json: bool) -> None:
    """Show the learned profiles, one table per task type, best adjusted score first.

    Per (agent, task type): runs, success rate, average quality, expertise
    (recency-weighted quality), confidence (min(1, runs / ramp)), adjusted score
    (expertise x confidence), average latency and when it was last updated.
    """
    with open_reader(config, store) as router:
        found = router.profiles(task_type)
        url = store_label(router)
        rates = router.store.repository(HandoffRepository).decision_stats(task_type)
        task_hint = "" if found or task_type is None else new_task_type_hint(router, task_type)
    known = sorted({p.agent_id for p in found})
    if agent is not None:
        found = [p for p in found if p.agent_id == agent]
    if as_json:
        print_json([p.model_dump(mode="json") for p in found])
        return
    if task_hint:
        console.print(f"no profiles of task type {shown(repr(task_type))}{shown(task_hint)}")
        return
    if not found and agent is not None and (hint := did_you_mean(agent, known)):
        console.print(f"no profiles of agent {shown(repr(agent))}{shown(hint)}")
        return
    if not found:
        scope = " matching the filters" if task_type or agent else ""
        console.print(f"no profiles{scope} in {shown(url)} yet; record outcomes with "
                      "`trustroute record`, `trustroute import` or `trustroute demo`")
    else:
        console.print(f"profiles in {shown(url)}")
        for table in profiles_tables(found):
            console.print()
            console.print(fitted(table, console))
        console.print(PROFILES_LEGEND, style="dim")
    if rates:  # logged by HandoffRunnable (a RAG app may route nothing)
        console.print(fitted(stats_table(rates, "hand-off rate by task type"), console))

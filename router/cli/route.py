"""``trustroute route TASK_TYPE``: which agent would take this task, and why."""

from __future__ import annotations

import warnings
from pathlib import Path

import click

from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    json_option,
    load_router_config,
    open_reader,
    print_json,
    router_options,
    strategy_option,
    strategy_overrides,
)
from trustroute.router.cli.hints import new_agent_hint, new_task_type_hint
from trustroute.router.cli.tables import decision_table, fitted, num
from trustroute.router.cli.text import shown
from trustroute.router.errors import did_you_mean
from trustroute.router.router import AgentRouter

#: what select() does on an abstention, by ``abstention.on_abstain`` (a preview does none)
ON_ABSTAIN = {"route_anyway": "routes it anyway", "human": "hands the task to a person",
              "raise": "raises Abstained"}


def adopt_known_agents(router: AgentRouter, config: Path | None = None) -> None:
    """With no agents configured, route among the agents the store has profiles for.

    So `trustroute import log.jsonl` then `trustroute route code` works without writing
    a config first. ``config``: the file given by --config, named in the error.
    """
    if router.agents:
        return
    for agent_id in sorted({state.agent_id for state in router.book}):
        router.register(agent_id)
    if not router.agents:
        where = shown(str(config)) if config is not None else \
            "router.yaml (`trustroute init` writes one)"
        raise CliError(f"no agents to route to: list them under `agents:` in {where}, pass "
                       "--agent, or record executions first")


@cli.command()
@click.argument("task_type")
@click.option("--agent", "-a", "agents", multiple=True, metavar="ID",
              help="Route among these agents instead of the config's (repeatable).")
@click.option("--exclude", "-x", multiple=True, metavar="ID",
              help="Leave this agent out, e.g. one that already failed (repeatable).")
@strategy_option
@router_options
@json_option
def route(task_type: str, agents: tuple[str, ...], exclude: tuple[str, ...],
          strategy: str | None, config: Path | None, store: str | None, as_json: bool) -> None:
    """Choose the agent for a task of TASK_TYPE and show the ranked candidates.

    Each candidate shows its score components (expertise, confidence, adjusted score,
    load, final score) and a one-line reason. Nothing is recorded and nobody is handed
    the task: this is the decision `select()` would make now, and an abstention is shown,
    not carried out. Agents come from the config, --agent, or else every agent
    the store has profiles for.
    """
    overrides = strategy_overrides(strategy)
    if agents:
        overrides["agents"] = list(agents)
    settings = load_router_config(config, store)
    on_abstain = settings.abstention.on_abstain
    # a preview: no decision log entry awaiting an outcome, no hand-off to a person
    settings = settings.without_handoffs()
    settings.trust = settings.trust.model_copy(update={"log_decisions": False})
    listed = [spec.id for spec in settings.agents]
    with open_reader(config, store, settings, transfer=None, **overrides) as router:
        adopt_known_agents(router, config)
        for agent_id in agents:  # -a names agents; one known nowhere may be a typo
            if hint := new_agent_hint(router, agent_id, listed):
                if settings.unknown_agents == "error":
                    raise CliError(f"--agent: unknown agent {agent_id!r}{hint}")
                warnings.warn(f"agent {agent_id!r} is not in the config and has no "
                              f"outcomes{hint}", stacklevel=1)
        if hint := new_task_type_hint(router, task_type):
            warnings.warn(f"task type {task_type!r} has no outcomes yet{hint}; routing it "
                          "as a new task type", stacklevel=1)
        for agent_id in exclude:  # a typo would exclude nothing and route anyway
            if agent_id not in router.agents:
                raise CliError(f"--exclude: unknown agent {agent_id!r}"
                               f"{did_you_mean(agent_id, router.agents)}; the agents are "
                               f"{', '.join(sorted(router.agents))}")
        decision = router.select(task_type, exclude=exclude)
    if as_json:
        print_json(decision.as_dict())
        return
    chosen = decision.chosen
    console.print(f"route [bold]{shown(task_type)}[/] → [bold green]{shown(decision.agent_id)}"
                  f"[/]  (final score {num(chosen.final_score)}, strategy {decision.strategy})")
    console.print(fitted(decision_table(decision), console))
    for rank, c in enumerate(decision.candidates, start=1):
        console.print(f"{rank}. {shown(c.agent_id)}: {shown(c.reason)}")
    if decision.abstained:
        console.print(f"The router abstains ({shown(decision.abstain_reason or '')}): with "
                      f"abstention.on_abstain: {on_abstain}, select() {ON_ABSTAIN[on_abstain]}.")

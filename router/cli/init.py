"""``trustroute init``: write a commented example config to start from."""

from __future__ import annotations

from pathlib import Path

import click

from trustroute.router.cli.base import CliError, cli, console, json_option, print_json
from trustroute.router.cli.text import shown
from trustroute.router.config.example import EXAMPLE_CONFIG


@cli.command()
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False),
                default=Path("router.yaml"))
@click.option("--force", "-f", is_flag=True, help="Overwrite PATH if it exists.")
@json_option
def init(path: Path, force: bool, as_json: bool) -> None:
    """Write a commented example config to PATH (default ./router.yaml).

    Every key is explained in the file; edit the agents, then try `trustroute demo`
    and `trustroute route TASK_TYPE`. An existing file is kept unless --force.
    """
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise CliError(f"{path}: init writes YAML; name the file *.yaml or *.yml")
    if path.exists() and not force:
        raise CliError(f"{path} already exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EXAMPLE_CONFIG, encoding="utf-8")
    if as_json:
        print_json({"path": str(path.resolve()), "written": True})
        return
    console.print(f"wrote [bold]{shown(str(path))}[/]: a commented example config.")
    console.print("next: edit its agents, then `trustroute demo` or `trustroute route code`.")

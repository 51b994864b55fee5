"""The ``trustroute`` command line: one click group, one module per command group.

Each command module decorates its functions with ``@cli.command`` on the shared group
from ``trustroute.router.cli.base``; importing it registers them. ``main`` turns every expected
error into one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

from trustroute.router.cli.base import run_cli

# Command modules register themselves on import; one line each, keep sorted.
COMMAND_MODULES: list[str] = [
    "demo",
    "handoff",
    "importer",
    "init",
    "profiles",
    "record",
    "replay",
    "route",
    "trust",
]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``trustroute`` script."""
    for name in COMMAND_MODULES:
        importlib.import_module(f"trustroute.router.cli.{name}")
    return run_cli(sys.argv[1:] if argv is None else argv)


def entry() -> None:
    """Console-script wrapper: exit with main()'s code."""
    raise SystemExit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()

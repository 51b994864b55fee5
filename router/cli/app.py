"""The ``trustroute`` command line: one click group, one module per command group.

Each command module decorates its functions with ``@cli.command`` on the shared group
from ``trustroute.router.cli.base``; importing it registers them. ``main`` turns every expected
error into one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import sys

# Importing a command module registers its commands; one name each, keep sorted.
from trustroute.router.cli import (  # noqa: F401
    demo,
    export,
    feedback,
    handoff,
    importer,
    init,
    profiles,
    record,
    reimport,
    replay,
    report,
    route,
    trust,
)
from trustroute.router.cli.base import run_cli


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``trustroute`` script."""
    return run_cli(sys.argv[1:] if argv is None else argv)


def entry() -> None:
    """Console-script wrapper: exit with main()'s code."""
    raise SystemExit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()

"""``make bench``: every benchmark, each printing its figures beside a reference
measured in the same run. ``python -m benchmarks NAME ...`` runs a subset.

Each module in ``BENCHMARKS`` exposes ``main() -> None``.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
import time

# One line per benchmark module (benchmarks/<name>.py); keep sorted.
BENCHMARKS: list[str] = [
    "calibration",
    "foundation",
    "handoff_banking77",
    "handoff_delivery",
    "import_stream",
    "langchain",
    "learning",
    "leases",
    "replay_feedback",
    "report",
    "shared_learning",
]
# Short names accepted on the command line.
ALIASES: dict[str, str] = {"shared": "shared_learning"}


USAGE = "\n".join(["usage: python -m benchmarks [NAME ...]",
                   "Runs the named benchmarks, or all of them (what `make bench` does).",
                   textwrap.fill(f"NAME: {', '.join(BENCHMARKS)} (or {', '.join(ALIASES)})",
                                 width=80, subsequent_indent="  ")])


def run(names: list[str]) -> int:
    """Run the named benchmarks (all when empty); returns an exit code."""
    if any(n in ("-h", "--help") for n in names):
        print(USAGE)
        return 0
    chosen = [ALIASES.get(n, n) for n in names] or BENCHMARKS
    unknown = [n for n in chosen if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}",
              file=sys.stderr)
        return 2
    for name in chosen:
        start = time.perf_counter()
        print(f"\n=== {name} ===", flush=True)
        importlib.import_module(f"benchmarks.{name}").main()
        print(f"--- {name}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))

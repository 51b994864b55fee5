"""``python -m benchmarks``: its help, and a name it does not know."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def benchmarks(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_help_is_usage_not_a_benchmark_name() -> None:
    for flag in ("--help", "-h"):
        helped = benchmarks(flag)
        assert helped.returncode == 0, helped.stderr
        assert helped.stdout.startswith("usage: python -m benchmarks [NAME ...]")
        assert "foundation" in helped.stdout and "unknown" not in helped.stdout
        assert max(len(line) for line in helped.stdout.splitlines()) <= 80


def test_an_unknown_name_is_an_error_on_stderr() -> None:
    wrong = benchmarks("fundation")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr.startswith("unknown benchmark(s): fundation; known: ")

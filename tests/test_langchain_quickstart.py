"""The LangChain quickstart runs offline end to end and shows what it promises."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "langchain_quickstart.py"


def test_quickstart_routes_records_and_prints_profiles(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "learned profiles" in out
    for agent in ("coder", "writer"):
        assert agent in out
    recorded = int(out.split("executions recorded: ")[1].split()[0])
    assert recorded >= 40  # one per question, plus one per fallback
    assert "next code question goes to" in out and "next prose question goes to" in out

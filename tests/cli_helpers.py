"""Running the real ``trustroute`` entry point in-process and reading what it printed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trustroute.router.cli.app import main


@dataclass
class Result:
    """Exit code and captured output of one ``trustroute`` invocation."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as JSON."""
        return json.loads(self.out)

    @property
    def error_line(self) -> str:
        """The single error line (asserts there is exactly one and no traceback)."""
        assert "Traceback" not in self.err
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one error line, got: {self.err!r}"
        assert lines[0].startswith("error: ")
        return lines[0][len("error: "):]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    """``trustroute ARGV...`` through ``trustroute.router.cli.app.main``."""
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: int = 200) -> Path:
    """Run commands in their own folder (./router.yaml, ./.trustroute), at ``columns``
    wide, with no store named by the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.delenv("TRUSTROUTE_STORE", raising=False)
    return tmp_path

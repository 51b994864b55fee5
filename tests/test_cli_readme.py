"""The README's quickstart and CLI tour work as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute.router import AgentRouter
from trustroute.router.config.example import EXAMPLE_CONFIG

README = Path(__file__).resolve().parents[1] / "README.md"


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_python_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRUSTROUTE_STORE", "mem://")
    (tmp_path / "router.yaml").write_text(EXAMPLE_CONFIG)
    (code,) = blocks(section("Python quickstart"), "python")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].split() == ["1", "0.0"]  # a: one failure, adjusted score 0
    assert printed[2].startswith("no agent available for task type 'code'")
    routed = namespace["router"]
    assert isinstance(routed, AgentRouter)
    assert set(routed.agents) == {"generalist", "coder", "writer", "analyst", "budget"}
    routed.close()


def test_every_command_of_the_tour_exists(capsys: pytest.CaptureFixture[str]) -> None:
    (tour,) = blocks(section("Command line tour"), "console")
    commands = {line.split()[1] for line in tour.splitlines() if line.startswith("trustroute ")}
    assert commands == {"init", "demo", "route", "record", "import", "profiles"}
    for name in commands:
        assert run(capsys, name, "--help").code == 0


def test_config_excerpt_is_a_valid_config(tmp_path: Path) -> None:
    from trustroute.router.config import load_config

    (excerpt,) = blocks(section("Config file"), "yaml")
    path = tmp_path / "router.yaml"
    path.write_text(excerpt)
    config = load_config(path)
    assert [a.id for a in config.agents] == ["generalist", "coder"]
    assert config.strategy.name == "confidence_weighted"

"""Agent ids and task types print as written: never as rich markup, emoji or escapes.

rich turns ``:smile:`` into an emoji and ``[red]`` into colour unless told otherwise,
and its markup escape doubles a trailing backslash where no tag follows. Names are
user data, so every command shows them literally.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import isolate, run

AGENTS = (":smile:", "[bold]x[/]", "[red]", "back\\")
TASK = ":thumbs_up:"


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(tmp_path, monkeypatch)
    (tmp_path / "router.yaml").write_text("store: surrealkv://store\nseed: 0\n")
    return tmp_path


def literal(text: str, names: tuple[str, ...] = (*AGENTS, TASK)) -> None:
    """Every name appears as written, and nothing rich would have made of one."""
    for name in names:
        assert name in text, (name, text)
    for made in ("\N{SMILING FACE WITH OPEN MOUTH}", "\N{THUMBS UP SIGN}", "back\\\\"):
        assert made not in text, (made, text)


def test_names_print_literally_in_every_command(capsys: pytest.CaptureFixture[str],
                                                workdir: Path) -> None:
    for agent in AGENTS:
        result = run(capsys, "record", agent, TASK, "--success", "--quality", "0.8")
        assert result.code == 0, result.err
        literal(result.out, (agent, TASK))
    for argv in (("profiles",), ("trust",), ("route", TASK), ("trust", "-a", AGENTS[0])):
        result = run(capsys, *argv)
        assert result.code == 0, result.err
        literal(result.out, (AGENTS[0], TASK) if argv[-1] == AGENTS[0] else (*AGENTS, TASK))
    log = workdir / "log.csv"
    log.write_text("agent,task_type,task,quality\n"
                   + "".join(f'"{a}",{TASK},t{n},0.{n}\n' for n, a in enumerate(AGENTS)))
    replayed = run(capsys, "replay", str(log), "-n", "1", "-S", "random")
    assert replayed.code == 0, replayed.err
    literal(replayed.out + replayed.err, ())
    refused = run(capsys, "record", ":smile: ", TASK, "--success")
    assert refused.code == 2
    literal(refused.error_line, (":smile: ",))

"""Typos get told apart from empty stores: filters that match nothing name what is
there and the closest name (as agent ids and config keys do)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import isolate, run

from trustroute import AgentRouter


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate(tmp_path, monkeypatch, columns=80)


@pytest.fixture
def decided(kv_url: str) -> str:
    """A store with 5 decisions of knowledge_gradient, each with its outcome."""
    with AgentRouter(["coder", "writer"], store=kv_url, seed=0) as router:
        for _ in range(5):
            router.record(router.select("code"), success=True, quality=0.8)
    return kv_url


def test_calibration_of_a_mistyped_strategy_is_an_error_naming_what_is_logged(
        capsys: pytest.CaptureFixture[str], decided: str) -> None:
    for argv in ([], ["--json"]):
        typo = run(capsys, "calibration", "--strategy", "thompsen", "--store", decided, *argv)
        assert typo.code == 2
        assert "no decisions of 'thompsen'" in typo.error_line
        assert "(did you mean 'thompson'?)" in typo.error_line
        assert typo.error_line.endswith("logged: knowledge_gradient (5)")
    other = run(capsys, "calibration", "--strategy", "thompson", "--store", decided)
    assert other.code == 0 and "no decisions of strategy 'thompson'" in other.out
    assert "logged: knowledge_gradient (5)" in " ".join(other.out.split())
    mine = run(capsys, "calibration", "--strategy", "knowledge_gradient", "--store", decided)
    assert mine.code == 0 and "decisions 5 (5 with outcome)" in mine.out


def test_a_task_type_close_to_a_known_one_gets_a_hint(
        capsys: pytest.CaptureFixture[str], decided: str) -> None:
    routed = run(capsys, "route", "cod", "--store", decided)
    assert routed.code == 0, routed.err  # a new task type may be meant: routed all the same
    assert "warning: task type 'cod' has no outcomes yet (did you mean 'code'?)" in routed.err
    listed = run(capsys, "profiles", "-t", "cod", "--store", decided)
    assert listed.out.strip() == "no profiles of task type 'cod' (did you mean 'code'?)"
    recorded = run(capsys, "record", "coder", "cod", "--success", "--store", decided)
    assert recorded.code == 0 and "(did you mean 'code'?); recording it as a new" in \
        recorded.err
    new = run(capsys, "route", "summaries", "--store", decided)
    assert new.code == 0 and new.err == ""  # nothing close: simply new


def test_route_agent_close_to_a_known_one_gets_a_hint(
        capsys: pytest.CaptureFixture[str], decided: str, workdir: Path) -> None:
    routed = run(capsys, "route", "code", "-a", "codr", "-a", "writer", "--store", decided)
    assert routed.code == 0, routed.err
    assert "warning: agent 'codr' is not in the config and has no outcomes (did you mean " \
        "'coder'?)" in routed.err
    (workdir / "router.yaml").write_text("agents: [coder, writer]\nunknown_agents: error\n")
    refused = run(capsys, "route", "code", "-a", "codr", "--store", decided)
    assert refused.code == 2
    assert refused.error_line == "--agent: unknown agent 'codr' (did you mean 'coder'?)"

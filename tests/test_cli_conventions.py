"""CLI conventions: --json everywhere, decay --dry-run, one timestamp format (ISO 8601,
UTC, Z), latencies in a unit that suits them, "did you mean" for agent ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import isolate, run

from trustroute import AgentRouter
from trustroute.router.cli.app import main  # noqa: F401  (registers every command)
from trustroute.router.cli.base import cli
from trustroute.router.cli.tables import duration
from trustroute.router.handoff.transfer import TransferRequest

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate(tmp_path, monkeypatch, columns=80)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"surrealkv://{tmp_path / 'db'}"
    with AgentRouter(["coder", "writer"], store=url, seed=0) as router:
        for i in range(6):
            d = router.select("code")
            router.record(d, success=i % 2 == 0, quality=0.7, latency_ms=2.4)
    return url


def test_every_command_takes_json() -> None:
    missing = [name for name, command in cli.commands.items()
               if not any("--json" in p.opts for p in command.params)]
    assert not missing


def test_report_json_names_the_page(capsys: pytest.CaptureFixture[str], url: str) -> None:
    result = run(capsys, "report", "--out", "r.html", "--store", url, "--json")
    assert result.code == 0, result.err
    said = result.json()
    assert Path(said["path"]) == Path("r.html").resolve() and said["executions"] == 6
    assert said["pictures"] is True and said["store"] == url


def times_in(data: Any) -> list[str]:
    """Every string in ``data`` that looks like a date/time."""
    if isinstance(data, dict):
        return [t for v in data.values() for t in times_in(v)]
    if isinstance(data, list):
        return [t for v in data for t in times_in(v)]
    return [data] if isinstance(data, str) and re.match(r"^\d{4}-\d\d-\d\d[T ]", data) else []


def test_json_times_are_iso_8601_utc_with_z(capsys: pytest.CaptureFixture[str],
                                           url: str) -> None:
    seen = []
    for argv in (["profiles"], ["trust"], ["handoffs", "--status", "all"],
                 ["record", "coder", "code", "--success"], ["route", "code"]):
        result = run(capsys, *argv, "--store", url, "--json")
        assert result.code == 0, result.err
        seen += times_in(result.json())
    assert seen and all(ISO_Z.match(t) for t in seen), seen


def test_latencies_use_a_unit_that_suits_them(capsys: pytest.CaptureFixture[str],
                                              url: str) -> None:
    out = run(capsys, "profiles", "--store", url).out
    assert "2 ms" in out and "0.00s" not in out
    said = run(capsys, "record", "coder", "code", "--success", "--latency-ms", "90000",
               "--store", url).out
    assert "1.5 min" in said and "90,000" not in said
    assert [duration(v) for v in (0.4, 2.4, 350, 1234, 270_000, 7_200_000)] == [
        "0.4 ms", "2 ms", "350 ms", "1.2 s", "4.5 min", "2.0 h"]


def test_decay_dry_run_says_what_it_would_do_and_writes_nothing(
        capsys: pytest.CaptureFixture[str], url: str) -> None:
    later = (datetime.now(UTC) + timedelta(days=20)).isoformat()
    dry = run(capsys, "decay", "--now", later, "--dry-run", "--store", url, "--json").json()
    assert dry["dry_run"] is True and dry["decayed"] == 2  # both pairs unseen for weeks
    again = run(capsys, "decay", "--now", later, "--dry-run", "--store", url)
    assert "would do (dry run, nothing written): 2 decayed" in again.out
    real = run(capsys, "decay", "--now", later, "--store", url, "--json").json()
    assert real["dry_run"] is False and real["decayed"] == 2  # the dry runs wrote nothing
    assert run(capsys, "decay", "--now", later, "--store", url, "--json").json()[
        "already_applied"] is True


def test_did_you_mean_for_agent_ids(capsys: pytest.CaptureFixture[str], url: str) -> None:
    line = run(capsys, "route", "code", "-x", "codr", "--store", url).error_line
    assert "unknown agent 'codr' (did you mean 'coder'?)" in line
    said = run(capsys, "profiles", "-a", "codr", "--store", url).out
    assert said.strip() == "no profiles of agent 'codr' (did you mean 'coder'?)"
    said = run(capsys, "trust", "-a", "writr", "--store", url).out
    assert said.strip() == "no trust data of agent 'writr' (did you mean 'writer'?)"
    with AgentRouter(["coder", "writer"], store="mem://", unknown_agents="error") as router, \
            pytest.raises(KeyError, match=r"did you mean 'coder'"):
        router.record(agent_id="coderr", task_type="code", success=True)


def test_a_hook_failing_during_a_command_is_one_warning_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "router.yaml").write_text(  # a receiver that refuses every connection
        "store: surrealkv://db\nagents: [bot]\nhooks:\n  - type: webhook\n"
        "    url: http://127.0.0.1:9/hand-off\n    timeout_s: 1\n    attempts: 1\n")
    with AgentRouter.from_config(tmp_path / "router.yaml") as router:
        assert router.transfer is not None
        router.transfer.accept(TransferRequest(reason="nobody answers"))
    retried = run(capsys, "handoffs", "--retry")
    assert retried.code == 0 and "0 delivered, 1 still pending" in retried.out
    lines = retried.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: transfer hook"), retried.err
    assert "failed after 1 attempt" in lines[0]


def test_a_subfolder_of_a_project_is_warned_of_the_config_above(
        workdir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "router.yaml").write_text("agents: [coder]\nunknown_agents: error\n")
    (workdir / "src").mkdir()
    monkeypatch.chdir(workdir / "src")
    result = run(capsys, "record", "coder", "code", "--success")
    assert result.code == 0
    assert result.err.splitlines()[0] == (
        "warning: no router.yaml here, so the defaults are used (no agents, a store in "
        "./.trustroute), though ../router.yaml exists: run from its folder or pass -c "
        "../router.yaml")
    given = run(capsys, "profiles", "-c", "../router.yaml")  # named: no warning
    assert given.code == 0 and "warning" not in given.err
    monkeypatch.chdir(workdir)
    here = run(capsys, "profiles")  # found here: no warning
    assert here.code == 0 and "warning" not in here.err


def test_a_relative_store_option_is_the_working_directorys_and_says_so(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "sub").mkdir()
    (workdir / "sub" / "router.yaml").write_text("store: surrealkv://data/db\nagents: [a]\n")
    kept = run(capsys, "record", "a", "code", "--success", "-c", "sub/router.yaml")
    assert kept.code == 0 and kept.err == ""  # the config's store: sub/data/db
    moved = run(capsys, "record", "a", "code", "--success", "-c", "sub/router.yaml",
                "--store", "surrealkv://data/db")
    assert moved.code == 0
    assert moved.err.splitlines()[0] == (
        f"warning: --store surrealkv://data/db is relative to the working directory "
        f"({(workdir / 'data' / 'db').resolve()}), not to the folder of sub/router.yaml as a "
        "store in it would be")
    assert (workdir / "sub" / "data" / "db").is_dir() and (workdir / "data" / "db").is_dir()
    same = run(capsys, "profiles", "--store", "surrealkv://data/db")  # no config elsewhere
    assert same.code == 0 and same.err == ""

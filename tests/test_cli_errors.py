"""Bad input on the command line: a non-zero exit code and one error line, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute.profiles.store import Store


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", [
    ("route", "code"), ("record", "a", "t", "--success"), ("profiles",), ("demo", "-n", "5"),
])
def test_a_broken_config_stops_every_command_with_its_file_and_key(
        capsys: pytest.CaptureFixture[str], workdir: Path, command: tuple[str, ...]) -> None:
    (workdir / "router.yaml").write_text("agents:\n  - {id: a, max_concurent: 2}\n")
    result = run(capsys, *command)
    assert result.code == 2
    assert result.error_line.startswith(
        "router.yaml: agents.0.max_concurent: unknown key 'max_concurent'")


def test_explicit_config_errors(capsys: pytest.CaptureFixture[str], workdir: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    missing = run(capsys, "profiles", "--config", "nope.toml")
    assert missing.code == 2 and missing.error_line.startswith("nope.toml: config file not")
    monkeypatch.delenv("TR_TEST_DB_PASS", raising=False)
    (workdir / "r.json").write_text('{"store": {"url": "ws://h:1", '
                                    '"password": "${TR_TEST_DB_PASS}"}}')
    env = run(capsys, "profiles", "-c", "r.json")
    assert env.code == 2
    assert env.error_line.startswith("r.json: store.password: environment variable "
                                     "TR_TEST_DB_PASS is not set")
    (workdir / "s.yaml").write_text("seed: [\n")
    syntax = run(capsys, "route", "x", "-c", "s.yaml")
    assert syntax.code == 2 and syntax.error_line.startswith("s.yaml: not valid YAML (line 2")


def test_a_store_held_by_another_process_is_one_clear_line(
        capsys: pytest.CaptureFixture[str], kv_url: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from trustroute.profiles.store import Store; "
         f"s = Store({kv_url!r}); print('open', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        result = run(capsys, "profiles", "--store", kv_url)
    finally:
        holder.communicate("", timeout=30)
    assert result.code == 2
    # which process: its pid and command line (on one line)
    assert f"already open in another process (pid {holder.pid}: python" in result.error_line
    assert "python -c import sys; from trustroute" in result.error_line
    assert "ws://HOST:PORT" in result.error_line


def test_a_store_opened_twice_in_this_process_says_so(
        capsys: pytest.CaptureFixture[str], kv_url: str) -> None:
    with Store(kv_url):
        result = run(capsys, "profiles", "--store", kv_url)
    assert result.code == 2
    assert "already open in this process" in result.error_line


@pytest.mark.parametrize(("argv", "expected"), [
    (("nope",), "No such command 'nope'"),
    (("route",), "Missing argument 'TASK_TYPE'"),
    (("route", "code", "--bogus"), "--bogus"),
    (("demo", "--tasks", "many"), "'many' is not a valid integer"),
    (("profiles", "--store", "mem:/"), "store URL 'mem:/' must look like"),
    (("import", "--format", "xml", "x.csv"), "'xml' is not one of"),
])
def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                   expected: str) -> None:
    result = run(capsys, *argv)
    assert result.code == 2
    assert expected in result.error_line


def test_help_and_version_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    bare = run(capsys)
    assert bare.code == 0 and "Commands:" in bare.out
    for name in ("demo", "import", "init", "profiles", "record", "route"):
        assert name in bare.out
        assert run(capsys, name, "--help").code == 0
    version = run(capsys, "--version")
    assert version.code == 0 and "trustroute" in version.out


def test_debug_adds_the_traceback_with_credentials_still_masked(
        capsys: pytest.CaptureFixture[str], workdir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (workdir / "r.yaml").write_text('store: {url: "ws://127.0.0.1:9", username: root, '
                                    'password: hunter2secret, retry_attempts: 1}\n')
    plain = run(capsys, "profiles", "-c", "r.yaml")
    assert plain.code == 2 and "could not connect" in plain.error_line
    for argv, env in ((("--debug", "profiles", "-c", "r.yaml"), None),
                      (("profiles", "-c", "r.yaml"), "1")):
        if env:
            monkeypatch.setenv("TRUSTROUTE_DEBUG", env)
        debug = run(capsys, *argv)
        assert debug.code == 2
        assert debug.err.startswith("error: could not connect")
        assert "Traceback (most recent call last)" in debug.err
        assert debug.err.rstrip().splitlines()[-1].startswith(
            "trustroute.profiles.store.errors.StoreUnavailableError: could not connect")
        assert "hunter2secret" not in debug.err + debug.out
    monkeypatch.delenv("TRUSTROUTE_DEBUG")
    assert "Traceback" not in run(capsys, "profiles", "-c", "r.yaml").err

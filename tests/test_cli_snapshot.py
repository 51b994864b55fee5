"""Inspecting a running app's embedded store: while an app process holds the
``surrealkv://`` store, the CLI's read commands show the snapshot it writes beside the
store and say as of when; a write command fails and says it needs the lock."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cli_helpers import Result, isolate, run

from trustroute import AgentRouter

APP = Path(__file__).with_name("snapshot_app.py")
ROOT = Path(__file__).resolve().parents[1]
AS_OF = re.compile(r"snapshot as of (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


class App:
    """The app process: records in rounds, holding the store all along."""

    def __init__(self, url: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
        self.proc = subprocess.Popen([sys.executable, str(APP), url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert self.readline() == "ready"

    def readline(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def round(self, n: int) -> int:
        """Record ``n`` executions; returns the app's total."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        said = self.readline()
        assert said.startswith("done "), said
        return int(said.split()[1])

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[App, str]]:
    isolate(tmp_path, monkeypatch, columns=80)
    url = f"surrealkv://{tmp_path / 'db'}"
    running = App(url)
    yield running, url
    running.stop()


def runs_shown(capsys: pytest.CaptureFixture[str], url: str, want: int,
               timeout: float = 30.0) -> Result:
    """``profiles --json`` until it shows ``want`` runs in all (a snapshot comes within
    0.2 s of a change; a generous bound for a loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        result = run(capsys, "profiles", "--json", "--store", url)
        if result.code == 2 and "no snapshot yet" in result.err:  # the first is not due yet
            seen = -1
        else:
            assert result.code == 0, result.err
            seen = sum(p["executions_total"] for p in result.json())
        if seen == want or time.monotonic() > deadline:
            assert seen == want, result.err
            return result
        time.sleep(0.1)


def test_read_commands_show_a_running_apps_snapshot_as_of_its_time(
        capsys: pytest.CaptureFixture[str], app: tuple[App, str]) -> None:
    proc, url = app
    total = proc.round(24)
    shown = runs_shown(capsys, url, total)
    as_of = datetime.fromisoformat(AS_OF.search(shown.err).group(1))  # type: ignore[union-attr]
    assert abs((datetime.now(UTC) - as_of).total_seconds()) < 60
    # every read command works while the app holds the store, and says as of when
    for argv in (["profiles"], ["trust"], ["calibration"], ["handoffs"],
                 ["handoffs", "--stats"], ["report", "--out", "r.html"]):
        result = run(capsys, *argv, "--store", url)
        assert result.code == 0, (argv, result.err)
        assert AS_OF.search(result.err), (argv, result.err)
    assert "coder" in run(capsys, "trust", "--store", url).out
    assert "no hook" in run(capsys, "handoffs", "--store", url).out
    page = Path("r.html").read_text(encoding="utf-8")
    assert "snapshot as of" in page and "trustroute-snapshot" not in page
    # the app goes on; the next snapshot shows what it recorded since
    total = proc.round(10)
    runs_shown(capsys, url, total)


@pytest.mark.slow  # two CLI processes beside the app's
def test_the_cli_as_a_separate_process_reads_the_snapshot(app: tuple[App, str],
                                                          tmp_path: Path) -> None:
    proc, url = app
    total = proc.round(8)
    deadline = time.monotonic() + 30
    cli = [sys.executable, "-m", "trustroute.router.cli.app", "profiles", "--store", url]
    while True:  # a real `trustroute` process beside the app's
        done = subprocess.run([*cli, "--json"], capture_output=True, text=True, timeout=120)
        if done.returncode == 2 and "no snapshot yet" in done.stderr and \
                time.monotonic() < deadline:
            continue  # the first snapshot comes 0.2 s after the app opened the store
        assert done.returncode == 0, done.stderr
        seen = sum(p["executions_total"] for p in json.loads(done.stdout))
        if seen == total or time.monotonic() > deadline:
            assert seen == total
            break
    assert AS_OF.search(done.stderr), done.stderr
    table = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert AS_OF.search(table.stderr) and "coder" in table.stdout, table.stderr
    assert "trustroute-snapshot" not in table.stdout  # named as the app's store
    for command in (["trust"], ["report", "--out", str(tmp_path / "r.html")], ["handoffs"],
                    ["calibration"]):  # each a `trustroute` process of its own
        seen = subprocess.run([*cli[:3], *command, "--store", url], capture_output=True,
                              text=True, timeout=120)
        assert seen.returncode == 0 and AS_OF.search(seen.stderr), (command, seen.stderr)


def test_a_write_command_says_it_needs_the_lock(capsys: pytest.CaptureFixture[str],
                                                app: tuple[App, str], tmp_path: Path) -> None:
    proc, url = app
    proc.round(2)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"agent_id": "coder", "task_type": "code", "success": true}\n')
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text('{"scores": [0.9], "needs_human": false}\n'
                        '{"scores": [0.2], "needs_human": true}\n')
    for argv in (["record", "coder", "code", "--success"], ["decay"],
                 ["review", "coder", "code", "--approve"], ["handoffs", "--retry"],
                 ["import", str(rows)], ["calibrate-handoff", str(labelled), "--name", "x"]):
        result = run(capsys, *argv, "--store", url)
        assert result.code == 2
        line = result.error_line
        assert "open in another process" in line and "writes to the store" in line, line
        assert "needs the store's lock" in line


@pytest.mark.slow  # a second app process
def test_without_a_snapshot_yet_the_error_says_when_one_comes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(tmp_path, monkeypatch)
    url = f"surrealkv://{tmp_path / 'db'}"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from trustroute import AgentRouter; "
         f"r = AgentRouter(['a'], store={url!r}); print('ready', flush=True); "
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        line = run(capsys, "profiles", "--store", url).error_line
        assert "no snapshot yet" in line and "snapshot_interval_s = 60 s" in line, line
    finally:
        holder.communicate("", timeout=60)
    # once the app is gone the store itself is read, with no note
    with AgentRouter(["a"], store=url) as router:
        router.record(agent_id="a", task_type="code", success=True)
    result = run(capsys, "profiles", "--store", url)
    assert result.code == 0 and "as of" not in result.err

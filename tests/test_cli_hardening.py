"""Hostile or contradictory input on the command line: one `error:` line, nothing written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import isolate, run

from trustroute import AgentRouter
from trustroute.profiles.records import ExecutionRecord, utc_now

DEEP = 1_000


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate(tmp_path, monkeypatch)


def stored(capsys: pytest.CaptureFixture[str], url: str) -> list[dict[str, object]]:
    result = run(capsys, "profiles", "--store", url, "--json")
    assert result.code == 0, result.err
    listed: list[dict[str, object]] = result.json()
    return listed


def deep_object(depth: int) -> str:
    return '{"x": ' * depth + "1" + "}" * depth


def jsonl(path: Path, *rows: str) -> Path:
    path.write_text("".join(f"{row}\n" for row in rows), encoding="utf-8")
    return path


ROW = '{"agent_id": "a", "task_type": "t", "success": true'


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("ts.jsonl", f'{ROW}, "timestamp": "0001-01-01T00:00:00+14:00"}}',
     "line 1: timestamp: timestamp 0001-01-01T00:00:00+14:00 is out of range in UTC"),
    ("ts.csv", "agent_id,task_type,success,timestamp\na,t,true,0001-01-01T00:00:00+14:00",
     "line 2: timestamp: timestamp 0001-01-01T00:00:00+14:00 is out of range in UTC"),
    ("posix.jsonl", f'{ROW}, "timestamp": 1e300}}', "line 1: timestamp: "),
    ("posix.jsonl", f'{ROW}, "timestamp": 1{"0" * 400}}}',
     "line 1: timestamp: 1000000000000000... POSIX seconds is out of range"),
    ("deep.jsonl", f'{ROW}, "metadata": {deep_object(DEEP)}}}',
     "line 1: nested too deeply to read"),
    ("deep.csv", "agent_id,task_type,success,metadata\na,t,true,\""
     + deep_object(DEEP).replace('"', '""') + '"',
     "line 2: metadata: nested deeper than 32 levels"),
    ("deep40.jsonl", f'{ROW}, "metadata": {deep_object(40)}}}',
     "line 1: metadata: nested deeper than 32 levels"),
    ("bool.jsonl", '{"agent_id": "a", "task_type": "t", "success": "maybe"}',
     "line 1: success: expected true/false"),
])
def test_bad_rows_are_one_line_naming_line_and_field(
        capsys: pytest.CaptureFixture[str], workdir: Path, kv_url: str, name: str,
        content: str, expected: str) -> None:
    path = workdir / name
    path.write_text(content + "\n", encoding="utf-8")
    result = run(capsys, "import", str(path), "--store", kv_url)
    assert result.code == 2
    assert result.error_line.startswith(f"{path}: {expected}")
    assert stored(capsys, kv_url) == []


@pytest.mark.parametrize("name", ["log.csv", "log.jsonl"])
def test_posix_second_timestamps_are_imported(capsys: pytest.CaptureFixture[str],
                                              workdir: Path, kv_url: str, name: str) -> None:
    path = workdir / name
    if name.endswith(".csv"):
        path.write_text("agent_id,task_type,success,timestamp\n"
                        "a,t,true,1738324800\nb,t,true,1738324800.5\n")
    else:
        jsonl(path, f'{ROW}, "timestamp": "1738324800"}}',
              '{"agent_id": "b", "task_type": "t", "success": true, '
              '"timestamp": 1738324800.5}')
    result = run(capsys, "import", str(path), "--store", kv_url, "--json")
    assert result.code == 0, result.err
    assert result.json()["imported"] == 2
    times = {p["agent_id"]: p["last_updated"] for p in stored(capsys, kv_url)}
    assert times == {"a": "2025-01-31T12:00:00Z", "b": "2025-01-31T12:00:00.500000Z"}


def test_a_huge_posix_number_is_seconds_not_milliseconds(
        capsys: pytest.CaptureFixture[str], workdir: Path, kv_url: str) -> None:
    path = jsonl(workdir / "log.jsonl", f'{ROW}, "timestamp": "32503680000"}}')  # year 3000
    result = run(capsys, "import", str(path), "--store", kv_url)
    # read as seconds it is the year 3000 (as milliseconds, 1971), which is in the future
    assert result.code == 2
    assert "line 1: timestamp: 3000-01-01T00:00:00Z is" in result.err


@pytest.mark.parametrize(("argv", "expected"), [
    (("record", "a", "t", "--success", "--decision-id", "a\x00b"),
     "decision_id: decision_id must not contain a NUL character"),
    (("record", "a", "t", "--success", "--record-id", "r" * 300),
     "record_id: record_id is 300 characters long; the limit is 256"),
    (("record", "a", "t", "--success", "-q", "inf"),
     "quality: quality must be a finite number, got inf"),
    (("record", "a", "t", "--failure", "--latency-ms", "1.7e308"),
     "latency_ms: latency_ms must be <= 31536000000.0, got 1.7e+308"),
    (("record", "a", "t", "--success", "-q", "2", "--cost", "-1"),
     "quality: quality must be <= 1.0, got 2.0; cost: cost must be >= 0.0, got -1.0"),
])
def test_an_invalid_record_is_one_line_naming_the_field(
        capsys: pytest.CaptureFixture[str], kv_url: str, argv: tuple[str, ...],
        expected: str) -> None:
    result = run(capsys, *argv, "--store", kv_url)
    assert result.code == 2
    assert result.error_line == expected
    assert stored(capsys, kv_url) == []


@pytest.mark.parametrize("fmt", ["yaml", "toml", "json"])
def test_a_config_nested_a_thousand_deep_is_one_line(capsys: pytest.CaptureFixture[str],
                                                     workdir: Path, fmt: str) -> None:
    inner = "[" * DEEP + "]" * DEEP
    text = {"yaml": f"seed: {inner}\n", "toml": f"seed = {inner}\n",
            "json": f'{{"seed": {inner}}}'}[fmt]
    (workdir / f"router.{fmt}").write_text(text)
    result = run(capsys, "profiles", "-c", f"router.{fmt}")
    assert result.code == 2
    assert result.error_line.startswith(f"router.{fmt}: not valid {fmt.upper()}")
    assert result.error_line.endswith("nested deeper than 32 levels")


def test_a_negative_seed_names_the_file_and_the_key(capsys: pytest.CaptureFixture[str],
                                                    workdir: Path) -> None:
    (workdir / "router.yaml").write_text("store: mem://\nseed: -5\n")
    result = run(capsys, "route", "code", "-a", "x")
    assert result.code == 2
    assert result.error_line == ("router.yaml: seed: expected a value greater than or equal "
                                 "to 0, got -5")
    (workdir / "log.csv").write_text("agent,task_type,task,quality\na,x,t1,1\n")
    for argv in (("demo", "--store", "mem://"), ("replay", "log.csv")):
        result = run(capsys, *argv, "--seed", "-5")
        assert result.code == 2
        assert result.error_line.startswith("Invalid value for '--seed': -5 is not in the range")


@pytest.mark.parametrize(("argv", "flags"), [
    (("record", "a", "t", "--success", "--failure"), "--success and --failure"),
    (("record", "a", "t", "--failure", "--success", "--json"), "--success and --failure"),
    (("review", "a", "t", "--approve", "--reject"), "--approve and --reject"),
    (("handoffs", "--stats", "--retry"), "--stats and --retry"),
    (("handoffs", "--retry", "--resolve", "abc"), "--retry and --resolve"),
])
def test_contradictory_flags_are_a_usage_error_and_write_nothing(
        capsys: pytest.CaptureFixture[str], kv_url: str, argv: tuple[str, ...],
        flags: str) -> None:
    result = run(capsys, *argv, "--store", kv_url)
    assert result.code == 2
    assert result.error_line.startswith(f"{flags} contradict each other; give one")
    assert stored(capsys, kv_url) == []
    trust = run(capsys, "trust", "--store", kv_url, "--json")
    assert trust.json() == []


def test_an_unlisted_agent_warns_on_one_line_or_is_refused(
        capsys: pytest.CaptureFixture[str], workdir: Path, kv_url: str) -> None:
    (workdir / "router.yaml").write_text(f"store: {kv_url}\nagents: [coder]\n")
    warned = run(capsys, "record", "codr", "code", "--success")
    assert warned.code == 0
    assert warned.err.strip().splitlines() == [
        "warning: recording agent 'codr', which this router does not list (did you mean "
        "'coder'?); recorded all the same (unknown_agents: error would refuse it)"]
    (workdir / "router.yaml").write_text(
        f"store: {kv_url}\nagents: [coder]\nunknown_agents: error\n")
    refused = run(capsys, "record", "codr2", "code", "--success")
    assert refused.code == 2
    assert refused.error_line == "unknown agent 'codr2' (did you mean 'coder'?)"
    assert [p["agent_id"] for p in stored(capsys, kv_url)] == ["codr"]


def test_decay_with_an_overflowing_now_names_the_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "decay", "--now", "0001-01-01T00:00:00+14:00", "--store", "mem://")
    assert result.code == 2
    assert result.error_line.startswith("--now: '0001-01-01T00:00:00+14:00' is out of range")


def test_every_json_output_is_strict_json(capsys: pytest.CaptureFixture[str],
                                          workdir: Path) -> None:
    log = workdir / "zero.csv"  # every quality 0: the oracle's mean is 0, % of it undefined
    log.write_text("agent,task_type,task,quality\na,x,t1,0\nb,x,t1,0\na,x,t2,0\nb,x,t2,0\n")
    result = run(capsys, "replay", str(log), "--runs", "1", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out, parse_constant=lambda name: pytest.fail(name))
    assert data["strategies"][0]["pct_oracle"]["mean"] is None


def test_profiles_json_of_an_overflowed_mean_is_null(capsys: pytest.CaptureFixture[str],
                                                     kv_url: str) -> None:
    # records from before latencies were bounded: their mean latency overflows to inf
    with AgentRouter(store=kv_url) as router:
        for n in range(2):
            router.record(ExecutionRecord.model_construct(
                agent_id="a", task_type="t", success=True, quality=1.0, latency_ms=1.7e308,
                cost=None, timestamp=utc_now(), record_id=f"old-{n}", decision_id=None,
                metadata={}))
    result = run(capsys, "profiles", "--store", kv_url, "--json")
    assert result.code == 0, result.err
    (profile,) = json.loads(result.out, parse_constant=lambda name: pytest.fail(name))
    assert profile["avg_latency_ms"] is None
    table = run(capsys, "profiles", "--store", kv_url)
    assert "inf" not in table.out and "—" in table.out


def test_handoffs_resolve_with_json_prints_json(capsys: pytest.CaptureFixture[str],
                                                kv_url: str) -> None:
    from trustroute.profiles.store import Store
    from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest

    request = TransferRequest(reason="no hook", task_type="cards")
    with Store(kv_url) as store:
        TransferDispatcher(store=store).dispatch(request)
    result = run(capsys, "handoffs", "--resolve", request.request_id[:8], "--store", kv_url,
                 "--json")
    assert result.code == 0, result.err
    assert result.json() == {"resolved": request.request_id, "hook_rows": 1}


def test_ctrl_c_exits_130_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("trustroute")
    # SIGINT as a terminal sends it (a shell's background job, as CI may run the suite,
    # ignores it, and a child inherits that)
    store = tmp_path / "db"
    proc = subprocess.Popen([str(cli), "demo", "--tasks", "1000000", "--store",
                             f"surrealkv://{store}", "--json"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # the command runs once its store is open (Python's own start-up, its imports,
        # is not the command's: a Ctrl-C there is the interpreter's, with its traceback)
        deadline = time.monotonic() + 300
        while not (store / "manifest").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # routing by now
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err


@pytest.mark.parametrize("command", [["profiles"], ["trust"], ["handoffs"], ["calibration"],
                                     ["route", "code", "-a", "x"], ["report", "--out", "r.html"]])
def test_a_read_command_on_a_path_with_no_store_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    isolate(tmp_path, monkeypatch)
    typo = tmp_path / "data" / "tpyo" / "db"
    result = run(capsys, *command, "--store", f"surrealkv://{typo}")
    assert result.code == 0, result.err
    assert not (tmp_path / "data").exists()  # no store, no lock file, no folder
    assert f"note: there is no store at surrealkv://{typo} yet: read as empty" in result.err


@pytest.mark.parametrize("command", [["profiles"], ["record", "a", "t", "--success"]])
def test_a_store_path_that_is_a_file_is_an_error_that_leaves_nothing_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    isolate(tmp_path, monkeypatch)
    (tmp_path / "afile").write_text("x\n")
    result = run(capsys, *command, "--store", "surrealkv://afile")
    assert result.code == 2
    assert result.error_line.endswith("afile: it is a file, and an embedded store is a "
                                      "folder (surrealkv://PATH names the folder)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # no afile.lock


def test_writes_to_an_in_memory_store_warn_that_they_do_not_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    isolate(tmp_path, monkeypatch)
    log = tmp_path / "one.jsonl"
    log.write_text('{"agent_id": "a", "task_type": "t", "success": true}\n')
    warning = ("warning: the store is mem:// (in memory): what this command writes is gone "
               "when it ends; give a surrealkv:// or ws:// store to keep it")
    for argv in (["record", "a", "t", "--success"], ["import", str(log)],
                 ["review", "a", "t", "--approve"]):
        result = run(capsys, *argv, "--store", "mem://")
        assert result.code == 0 and result.err.splitlines()[0] == warning, (argv, result.err)
    demo = run(capsys, "demo", "-n", "5", "--store", "mem://")  # a throw-away run: no word
    assert demo.code == 0 and "warning" not in demo.err


@pytest.mark.parametrize("limit", [str(2**63 - 1), str(2**63), str(2**64)])
def test_a_huge_handoffs_limit_names_the_option(capsys: pytest.CaptureFixture[str],
                                                kv_url: str, limit: str) -> None:
    result = run(capsys, "handoffs", "--limit", limit, "--store", kv_url)
    assert result.code == 2
    assert result.error_line.startswith(f"Invalid value for '--limit': {limit} is not in the "
                                        "range 1<=x<=1000000")

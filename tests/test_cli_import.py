"""`trustroute import`: JSONL and CSV logs, duplicates, and bad rows that write nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute.router import AgentRouter
from trustroute.router.cli.execution_file import ExecutionFileError, iter_executions


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def stored(kv_url: str) -> dict[tuple[str, str], int]:
    with AgentRouter(store=kv_url) as r:
        return {(p.agent_id, p.task_type): p.executions_total for p in r.profiles()}


def test_jsonl_import_updates_profiles_and_skips_duplicates(
        capsys: pytest.CaptureFixture[str], workdir: Path, kv_url: str) -> None:
    rows: list[dict[str, object]] = [
        {"agent_id": "a", "task_type": "code", "success": True, "quality": 0.9,
         "latency_ms": 100, "cost": 0.01, "timestamp": "2025-01-02T03:04:05Z",
         "record_id": "r-1"},
        {"agent": "b", "task_type": "code", "success": "no"},
        {"agent_id": "a", "task_type": "math", "success": 1, "timestamp": 1735689600,
         "metadata": {"ticket": 7}},
    ] + [{"agent_id": "b", "task_type": "code", "success": True}] * 3  # repeated runs
    path = jsonl(workdir / "log.jsonl", rows)
    first = run(capsys, "import", str(path), "--store", kv_url, "--json")
    assert first.code == 0, first.err
    assert first.json() | {"store": None} == {"file": str(path), "store": None, "rows": 6,
                                               "imported": 6, "duplicates_skipped": 0}
    assert stored(kv_url) == {("a", "code"): 1, ("b", "code"): 4, ("a", "math"): 1}
    again = run(capsys, "import", str(path), "--store", kv_url)
    assert again.code == 0
    assert "imported 0 executions" in again.out and "skipped 6 duplicates" in again.out
    assert stored(kv_url) == {("a", "code"): 1, ("b", "code"): 4, ("a", "math"): 1}
    with AgentRouter(store=kv_url) as r:
        p = r.profile("a", "code")
        assert p.avg_quality == pytest.approx(0.9) and p.avg_latency_ms == 100.0
        assert p.last_updated is not None and p.last_updated.year == 2025
        assert r.profile("b", "code").executions_successful == 3


def test_an_imported_row_without_cost_gets_cost_per_call_as_record_does(
        capsys: pytest.CaptureFixture[str], workdir: Path, kv_url: str) -> None:
    (workdir / "router.yaml").write_text(
        f"store: {kv_url}\nagents:\n  - {{id: coder, cost_per_call: 0.012}}\n")
    path = jsonl(workdir / "log.jsonl", [{"agent_id": "coder", "task_type": "a",
                                           "success": True}])
    assert run(capsys, "import", str(path)).code == 0
    assert run(capsys, "record", "coder", "b", "--success").code == 0
    costs = {p["task_type"]: p["avg_cost"] for p in run(capsys, "profiles", "--json").json()}
    assert costs == {"a": 0.012, "b": 0.012}


def test_csv_import_with_small_batches_and_excel_bom(
        capsys: pytest.CaptureFixture[str], workdir: Path, kv_url: str) -> None:
    lines = ["agent,task_type,success,quality,latency_ms,cost,timestamp,record_id"]
    for i in range(25):
        ok = "true" if i % 5 else "false"
        lines.append(f"agent{i % 3},t{i % 2},{ok},,{i * 10},,2025-03-01T00:00:{i:02d}+00:00,"
                     f"id-{i}")
    path = workdir / "log.csv"
    path.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    result = run(capsys, "import", str(path), "--batch-size", "4", "--store", kv_url, "--json")
    assert result.code == 0, result.err
    assert result.json()["imported"] == 25
    counts = stored(kv_url)
    assert sum(counts.values()) == 25 and counts[("agent0", "t0")] == 5
    with AgentRouter(store=kv_url) as r:  # quality defaulted from success
        p = r.profile("agent0", "t0")
        assert p.avg_quality == pytest.approx(p.success_rate)


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t", "success": true}\n\n'
                  '{"agent_id": "a", "task_type": "t", "success": true, "quality": 1.5}\n',
     "line 3: quality: quality must be <= 1.0, got 1.5"),
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t", "success": "maybe"}\n',
     "line 1: success: expected true/false"),
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t"}\n', "line 1: success: missing"),
    ("bad.jsonl", '{"task_type": "t", "success": true}\n', "line 1: agent_id: missing"),
    ("bad.jsonl", '{"agent_id": "a", "agent": "b", "task_type": "t", "success": true}\n',
     "line 1: agent_id: agent_id and agent disagree"),
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t", "success": true, "qualty": 1}\n',
     "line 1: qualty: unknown column (did you mean 'quality'?); allowed: "),
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t", "success": true,'
                  ' "timestamp": "2025-01-01T00:00:00"}\n', "line 1: timestamp: "),
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t", "success": true,'
                  ' "latency_ms": "slow"}\n', "line 1: latency_ms: expected a number"),
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t", "success": true, "cost": -1}\n',
     "line 1: cost: cost must be >= 0"),
    ("bad.jsonl", '{"agent_id": "a", "task_type": "t", "success": true}\n{oops\n',
     "line 2: not valid JSON"),
    ("bad.jsonl", '[1, 2]\n', "line 1: expected a JSON object, got list"),
    ("bad.csv", "agent_id,task_type,success\na,t,true\nb,t,true,extra\n",
     "line 3: more values than the 3 header columns"),
    ("bad.csv", "agent_id,task_type\na,t\n", "line 1: success: missing column"),
    ("bad.csv", "agent_id,task_type,success,score\na,t,true,1\n",
     "line 1: score: unknown column"),
    ("bad.csv", "agent_id,task_type,success,\na,t,true,\n",
     "line 1: the header has a column without a name (a trailing comma?); allowed: "),
    ("bad.csv", "agent_id,task_type,success,metadata\na,t,true,{oops\n",
     "line 2: metadata: expected a JSON object"),
    ("bad.csv", "agent_id,task_type,success\na,,true\n", "line 2: task_type: missing"),
    ("bad.txt", "agent_id,task_type,success\n", "use .jsonl or .csv, or pass --format"),
    ("ids.jsonl", '{"agent_id": ["coder"], "task_type": "t", "success": true}\n',
     "line 1: agent_id: expected text, got list"),
    ("ids.jsonl", '{"agent": {"name": "c"}, "task_type": "t", "success": true}\n',
     "line 1: agent: expected text, got dict"),
    ("ids.jsonl", '{"agent_id": "a", "task_type": true, "success": true}\n',
     "line 1: task_type: expected text, got true/false"),
    ("ids.jsonl", '{"agent_id": "a", "task_type": "t", "success": true, "record_id": [1]}\n',
     "line 1: record_id: expected text, got list"),
    ("twice.jsonl", '{"agent_id": "a", "task_type": "t", "success": true, "success": false}\n',
     "line 1: key 'success' is given twice"),
    ("twice.csv", "agent_id,task_type,success,quality,quality\na,t,true,0.9,0.1\n",
     "line 1: quality: column named twice"),
    ("quote.csv", 'agent_id,task_type,success\na,t,true\n"b,t,true\nc,t,true\n',
     "line 3: not valid CSV: a quote opened here is never closed"),
])
def test_a_bad_row_names_line_and_field_and_writes_nothing(
        capsys: pytest.CaptureFixture[str], workdir: Path, kv_url: str, name: str, text: str,
        expected: str) -> None:
    path = workdir / name
    path.write_text(text, encoding="utf-8")
    result = run(capsys, "import", str(path), "--store", kv_url)
    assert result.code == 2
    assert result.error_line.startswith(f"{path}: ")
    assert expected in result.error_line
    assert stored(kv_url) == {}  # the good rows before the bad one were not written either


def test_a_number_without_quotes_is_a_name_too(capsys: pytest.CaptureFixture[str],
                                               workdir: Path, kv_url: str) -> None:
    path = jsonl(workdir / "n.jsonl", [{"agent_id": 7, "task_type": "t", "success": True,
                                        "record_id": 12}])
    assert run(capsys, "import", str(path), "--store", kv_url).code == 0
    assert stored(kv_url) == {("7", "t"): 1}


def test_format_option_overrides_the_extension(capsys: pytest.CaptureFixture[str],
                                               workdir: Path, kv_url: str) -> None:
    path = workdir / "log.txt"
    path.write_text("agent_id,task_type,success\na,t,yes\n", encoding="utf-8")
    result = run(capsys, "import", str(path), "--format", "csv", "--store", kv_url, "--json")
    assert result.code == 0 and result.json()["imported"] == 1


def test_missing_file_and_empty_file(capsys: pytest.CaptureFixture[str], workdir: Path,
                                     kv_url: str) -> None:
    missing = run(capsys, "import", str(workdir / "nope.jsonl"), "--store", kv_url)
    assert missing.code == 2 and "does not exist" in missing.error_line
    empty = workdir / "empty.csv"
    empty.write_text("", encoding="utf-8")
    result = run(capsys, "import", str(empty), "--store", kv_url, "--json")
    assert result.code == 0 and result.json()["imported"] == 0


def test_derived_record_ids_are_stable_and_count_repeats(workdir: Path) -> None:
    row = {"agent_id": "a", "task_type": "t", "success": True}
    path = jsonl(workdir / "x.jsonl", [row, {**row, "quality": 0.5}, row])
    first = [r.record_id for r in iter_executions(path)]
    assert len(set(first)) == 3  # the repeated row is a second execution, not a duplicate
    assert [r.record_id for r in iter_executions(path)] == first
    shifted = jsonl(workdir / "y.jsonl", [{**row, "agent_id": "z"}, row, row])
    assert set(first[0::2]) == {r.record_id for r in list(iter_executions(shifted))[1:]}


def test_non_utf8_file_is_a_clear_error(workdir: Path) -> None:
    path = workdir / "latin.csv"
    path.write_bytes(b"agent_id,task_type,success\ncaf\xe9,t,true\n")
    with pytest.raises(ExecutionFileError, match="not UTF-8"):
        list(iter_executions(path))


def test_a_pipe_is_refused_not_read_twice_into_a_false_success(workdir: Path,
                                                               kv_url: str) -> None:
    """`zcat log.gz | trustroute import /dev/stdin`: the second pass found the pipe empty,
    stored nothing, exited 0 and called every row a duplicate."""
    rows = "".join(json.dumps({"agent_id": "a", "task_type": "t", "success": True,
                               "record_id": f"p{i}"}) + "\n" for i in range(3))
    trustroute = str(Path(sys.executable).parent / "trustroute")
    done = subprocess.run([trustroute, "import", "/dev/stdin", "--format", "jsonl",
                           "--store", kv_url], input=rows, capture_output=True, text=True,
                          timeout=120, cwd=workdir, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 2, done.stdout
    assert done.stderr.splitlines() == [
        "error: /dev/stdin is not a regular file (a pipe?): import reads its file twice; "
        "save it to a file first (zcat log.gz > log.jsonl)"]
    assert stored(kv_url) == {}

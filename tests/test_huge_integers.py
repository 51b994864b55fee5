"""A JSON integer too large for a float (401 digits) is one error line naming the file,
the line and the field, not an OverflowError traceback (finding s15 #7; #8 below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute.router import AgentRouter
from trustroute.router.handoff import RetrievalConfidence

HUGE = 10**400


def lines(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_import_feedback_score(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                               kv_url: str) -> None:
    with AgentRouter(store=kv_url) as r:
        r.record(agent_id="a", task_type="t", success=True, record_id="r1")
    path = lines(tmp_path / "f.jsonl", [{"run_id": "r1", "score": HUGE}])
    result = run(capsys, "import-feedback", str(path), "--store", kv_url)
    assert result.code == 2
    assert result.error_line == f"{path}:1: score must be a finite number, got inf"


def test_calibrate_handoff_scores(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [{"scores": [0.1 * (i % 9), 0.5], "needs_human": i % 2 == 0}
                                     for i in range(10)]
    path = lines(tmp_path / "s.jsonl", [*rows, {"scores": [HUGE], "needs_human": False}])
    result = run(capsys, "calibrate-handoff", str(path), "--store", "mem://")
    assert result.code == 2
    assert result.error_line == (f"{path}:11: scores[0] must be a finite number, got an "
                                 "integer of 401 digits")
    with pytest.raises(ValueError, match="must be a finite number, got an integer of 401"):
        RetrievalConfidence().evaluate([HUGE])


@pytest.mark.parametrize(("column", "problem"), [
    ("quality", "quality must be in [0, 1], got 100000000000000000000000... (too large)"),
    ("cost", "cost must be >= 0, got 100000000000000000000000... (too large)"),
])
def test_replay_outcome_log(capsys: pytest.CaptureFixture[str], tmp_path: Path, column: str,
                            problem: str) -> None:
    rows: list[dict[str, object]] = [
        {"agent": agent, "task_type": "t", "task": f"t{i}", "quality": 0.5}
        for i in range(3) for agent in "ab"]
    rows[-1][column] = HUGE
    path = lines(tmp_path / "log.jsonl", rows)
    result = run(capsys, "replay", str(path), "--runs", "1", "-S", "random")
    assert result.code == 2
    assert result.error_line == f"{path}:6: {problem}"


@pytest.mark.parametrize("at", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:30:00+01:00"])
def test_import_feedback_created_at_out_of_range_in_utc(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, kv_url: str, at: str) -> None:
    """Finding s15 #8: a time that overflows once converted to UTC."""
    path = lines(tmp_path / "f.jsonl", [{"run_id": "r1", "score": 0.5, "created_at": at}])
    result = run(capsys, "import-feedback", str(path), "--store", kv_url)
    assert result.code == 2
    assert result.error_line == f"{path}:1: created_at {at!r} is out of range in UTC"

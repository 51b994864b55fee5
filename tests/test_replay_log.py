"""Outcome logs: CSV and JSONL loading, and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trustroute.router.replay import OutcomeLogError, load_outcomes, outcomes_from_rows


def write_csv(path: Path, rows: list[str], header: str = "agent,task_type,task,quality") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_csv_log_becomes_dense_matrices(tmp_path: Path) -> None:
    log = load_outcomes(write_csv(tmp_path / "log.csv", [
        "a,code,t1,1.0", "b,code,t1,0.5", "a,chat,t2,0", "b,chat,t2,1", "a,code,t3,0.25",
    ]))
    assert log.agents == ("a", "b")
    assert log.tasks == ("t1", "t2", "t3")
    assert log.task_types == ("code", "chat", "code")
    assert log.types == ["chat", "code"]
    assert np.isnan(log.quality[2, 1])  # b has no row for t3
    assert log.quality[0].tolist() == [1.0, 0.5]
    assert log.cost is None and log.latency_ms is None
    assert log.summary() == {"agents": 2, "tasks": 3, "task_types": 2, "rows": 5}
    means = log.type_means()
    assert means[log.types.index("code")].tolist() == pytest.approx([0.625, 0.5])


def test_jsonl_log_with_cost_and_latency(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    rows = [{"agent": "a", "task_type": "x", "task": "t1", "quality": 0.9, "cost": 0.02,
             "latency_ms": 1200},
            {"agent": "b", "task_type": "x", "task": "t1", "quality": 0.4}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    log = load_outcomes(path)
    assert log.cost is not None and log.latency_ms is not None
    assert log.cost[0, 0] == pytest.approx(0.02)
    assert np.isnan(log.cost[0, 1])
    assert log.latency_ms[0, 0] == 1200.0


@pytest.mark.parametrize(("rows", "header", "needle"), [
    (["a,x,t1,1.5"], None, "log.csv:2: quality must be in [0, 1], got '1.5'"),
    (["a,x,t1,high"], None, "quality must be a number"),
    (["a,x,t1,"], None, "log.csv:2: missing quality"),
    (["a,x,t1,1", "a,x,t1,0"], None, "log.csv:3: a second row for agent 'a' on task 't1'"),
    (["a,x,t1,1", "b,y,t1,0"], None, "task 't1' has task_type 'y' but earlier rows say 'x'"),
    (["a,x,t1,1"], "agent,kind,task,quality", "header lacks column(s) task_type"),
    ([], None, "no outcome rows"),
    (["a,x,t1,0.5,-1"], "agent,task_type,task,quality,cost", "cost must be >= 0"),
    # ids a router refuses are refused at their line, not later as agents.1.id
    (["a,x,t1,1", '" b",x,t1,0'], None,
     "log.csv:3: agent: agent must not start or end with white space, got ' b'"),
    (["a,x,t1,1", "b\x1b,x,t1,0"], None,
     "log.csv:3: agent: agent must not contain control characters (U+001B at position 1)"),
    (["a,x,t1,1", f"{'b' * 300},x,t1,0"], None,
     "log.csv:3: agent: agent is 300 characters long; the limit is 256"),
    (["a,x ,t1,1"], None,
     "log.csv:2: task_type: task_type must not start or end with white space, got 'x '"),
])
def test_bad_csv_rows_name_the_line_and_field(tmp_path: Path, rows: list[str],
                                              header: str | None, needle: str) -> None:
    path = write_csv(tmp_path / "log.csv", rows, header or "agent,task_type,task,quality")
    with pytest.raises(OutcomeLogError) as info:
        load_outcomes(path)
    assert needle in str(info.value)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(OutcomeLogError, match="no such file"):
        load_outcomes(tmp_path / "missing.csv")
    (tmp_path / "log.parquet").write_text("x")
    with pytest.raises(OutcomeLogError, match="unknown format"):
        load_outcomes(tmp_path / "log.parquet")
    bad = tmp_path / "log.jsonl"
    bad.write_text('{"agent": "a"\n')
    with pytest.raises(OutcomeLogError, match=r"log.jsonl:1: not valid JSON"):
        load_outcomes(bad)
    bad.write_text("[1, 2]\n")
    path = tmp_path / "ids.jsonl"
    path.write_text('{"agent": ["a"], "task": "t1", "task_type": "x", "quality": 1}\n')
    with pytest.raises(OutcomeLogError, match=r"ids.jsonl:1: agent: expected text, got list"):
        load_outcomes(path)
    with pytest.raises(OutcomeLogError, match="expected a JSON object"):
        load_outcomes(bad)


def test_rows_from_python() -> None:
    log = outcomes_from_rows([{"agent": "a", "task_type": "x", "task": 1, "quality": "0.5"}])
    assert log.tasks == ("1",)
    assert log.quality[0, 0] == 0.5

"""One rule for white space around identifiers, on every entry point: refused, naming the
field (a silent strip moved a verdict to another run, a kept blank made a second task
type); comments are kept verbatim. Findings s15 #4 and #12."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute.profiles.records import InvalidRecord
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router import AgentRouter


@pytest.mark.parametrize(("field", "kwargs"), [
    ("agent_id", {"agent_id": " a"}),
    ("task_type", {"task_type": "code "}),
    ("record_id", {"record_id": "r1\t"}),
    ("run_ids", {"run_ids": ["\u00a0run"]}),
])
def test_record_refuses_blanks_around_an_identifier(router: AgentRouter, field: str,
                                                    kwargs: dict[str, str]) -> None:
    args = {"agent_id": "a", "task_type": "code", **kwargs}
    with pytest.raises(InvalidRecord, match=f"{field} must not start or end with white space"):
        router.record(success=True, **args)
    assert router.store.executions.count() == 0


def test_feedback_and_review_refuse_blanks_around_ids_and_keep_comments(
        router: AgentRouter) -> None:
    router.record(agent_id="a", task_type="code", success=True, record_id="r1")
    for kwargs, field in (({"feedback_id": " f1"}, "feedback_id"), ({"key": "user "}, "key")):
        with pytest.raises(ValueError, match=f"{field} must not start or end with white"):
            router.feedback("r1", score=0.5, **kwargs)
    with pytest.raises(ValueError, match="ref must not start or end with white space"):
        router.feedback(" r1", score=0.5)
    with pytest.raises(ValueError, match="task_type must not start or end with white space"):
        router.review("a", " code", approved=True)
    router.feedback("r1", score=0.5, comment="  two blanks either side  ")
    (said,) = router.store.repository(TrustRepository).feedback("a", "code")
    assert said["comment"] == "  two blanks either side  "


def test_a_csv_with_a_blank_after_each_comma_is_refused_not_split_into_task_types(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, kv_url: str) -> None:
    path = tmp_path / "log.csv"
    path.write_text("agent_id, task_type, success\ncoder,code,true\ncoder, code, true\n",
                    encoding="utf-8")
    result = run(capsys, "import", str(path), "--store", kv_url)
    assert result.code == 2
    assert result.error_line == (f"{path}: line 3: task_type: task_type must not start "
                                 "or end with white space, got ' code'")
    with AgentRouter(store=kv_url) as r:
        assert r.store.executions.count() == 0


@pytest.mark.parametrize(("row", "problem"), [
    ({"id": " f1", "run_id": "r1", "score": 0.1}, "id must not start or end with white"),
    ({"run_id": " r1", "score": 0.1}, "ref must not start or end with white space"),
    ({"run_id": "r1", "key": " user", "score": 0.1}, "key must not start or end with white"),
    ({"kind": "review", "agent_id": "a", "task_type": "code ", "approved": True},
     "task_type must not start or end with white space"),
])
def test_import_feedback_refuses_blanks_around_ids_instead_of_moving_the_verdict(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, kv_url: str,
        row: dict[str, object], problem: str) -> None:
    with AgentRouter(store=kv_url) as r:
        r.record(agent_id="a", task_type="code", success=True, record_id="r1")
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps({"run_id": "r1", "score": 0.9, "id": "ok"}) + "\n"
                    + json.dumps(row) + "\n", encoding="utf-8")
    result = run(capsys, "import-feedback", str(path), "--store", kv_url)
    assert result.code == 2
    line = result.error_line
    assert line.startswith(f"{path}:2: ") and problem in line, line
    with AgentRouter(store=kv_url) as r:
        assert r.store.repository(TrustRepository).feedback("a", "code") == []


def test_import_feedback_keeps_a_comment_verbatim(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, kv_url: str) -> None:
    with AgentRouter(store=kv_url) as r:
        r.record(agent_id="a", task_type="code", success=True, record_id="r1")
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps({"run_id": "r1", "score": 0.9, "comment": " as said \n"})
                    + "\n", encoding="utf-8")
    assert run(capsys, "import-feedback", str(path), "--store", kv_url).code == 0
    with AgentRouter(store=kv_url) as r:
        (said,) = r.store.repository(TrustRepository).feedback("a", "code")
    assert said["comment"] == " as said \n"

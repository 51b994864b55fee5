"""`trustroute feedback` and `trustroute import-feedback` against a real embedded store."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from cli_helpers import isolate, run

from trustroute.profiles.store.trust import TrustRepository
from trustroute.router import AgentRouter

CONFIG = """\
store: surrealkv://store
agents: [a, b]
unknown_agents: error
feedback:
  wait_s: 3600
  default: ignore
  keys:
    judge: {scale: [1, 10]}
"""


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(tmp_path, monkeypatch)
    (tmp_path / "router.yaml").write_text(CONFIG)
    return tmp_path


def recorded(count: int) -> list[tuple[str, str, str]]:
    """``count`` executions without quality: (decision id, record id, run id) each."""
    out = []
    with AgentRouter.from_config("router.yaml") as router:
        for n in range(count):
            d = router.select("chat")
            rec = router.record(d, success=True, run_ids=[f"run-{n}"])
            out.append((d.decision_id, rec.record_id, f"run-{n}"))
    return out


def verdicts() -> list[dict]:
    with AgentRouter.from_config("router.yaml") as router:
        repo = router.store.repository(TrustRepository)
        return [row for agent in ("a", "b") for row in repo.feedback(agent, "chat")]


def test_feedback_command_sets_the_quality(capsys: pytest.CaptureFixture[str]) -> None:
    (decision_id, record_id, run_id), = recorded(1)
    result = run(capsys, "feedback", run_id, "--reject", "-m", "wrong answer", "--json")
    assert result.code == 0, result.err
    body = result.json()
    assert body["record_id"] == record_id and body["stored"] is True
    assert body["approved"] is False and body["key"] == "user"
    judged = run(capsys, "feedback", decision_id, "--score", "10", "--key", "judge")
    assert judged.code == 0 and "verdict on" in judged.out
    with AgentRouter.from_config("router.yaml") as router:
        p = router.profile(body["agent_id"], "chat")
        assert (p.pending, p.avg_quality) == (0, pytest.approx(0.5))
    assert [r.get("comment") for r in verdicts()] == ["wrong answer", None]


def test_a_run_awaiting_its_verdict_shows_no_quality_until_it_comes(
        capsys: pytest.CaptureFixture[str]) -> None:
    said = run(capsys, "record", "a", "chat", "--success", "--record-id", "r1")
    assert said.code == 0, said.err
    assert "awaiting a verdict" in said.out and "quality 1.00" not in said.out
    table = run(capsys, "profiles").out
    row = next(line for line in table.splitlines() if line.startswith("a "))
    assert row.split()[3] == "—"  # quality: a mean over no verdict
    assert "awaiting a verdict, not in quality yet: a 1" in table
    assert run(capsys, "feedback", "r1", "--score", "0.25").code == 0
    table = run(capsys, "profiles").out
    row = next(line for line in table.splitlines() if line.startswith("a "))
    assert row.split()[3] == "0.25" and "awaiting a verdict" not in table
    rated = run(capsys, "record", "a", "chat", "--success", "-q", "0.5", "--json").json()
    assert rated["awaiting_verdict"] is False and rated["record"]["quality"] == 0.5


def test_record_json_claims_no_quality_for_a_run_awaiting_its_verdict(
        capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):  # the retry of a stored id says the same
        said = run(capsys, "record", "a", "chat", "--success", "--record-id", "r1", "--json")
        assert said.code == 0, said.err
        body = said.json()
        assert body["awaiting_verdict"] is True and body["record"]["quality"] is None
    assert body["stored"] is False
    assert body["profile"]["avg_quality"] is None  # a mean over no judged run
    listed = run(capsys, "profiles", "--json").json()
    assert [(p["agent_id"], p["pending"], p["avg_quality"]) for p in listed] == [("a", 1, None)]


@pytest.mark.parametrize(("argv", "message"), [
    (["--score", "1.5"], "score must be <= 1.0"),
    (["--score", "nan"], "score must be a finite number"),
    (["--approve", "--score", "0.5"], "contradict each other"),
    ([], "say --approve, --reject or --score"),
    (["--key", "judge", "--score", "11"],
     "score must be <= 10.0, got 11.0 (key 'judge': scale [1, 10])"),
    (["--key", "grader", "--score", "7"], "score must be <= 1.0, got 7.0 (key 'grader': "
     "scale [0, 1], the default; set feedback.keys.grader.scale for another)"),
])
def test_feedback_bad_input_is_one_line_and_stores_nothing(
        capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    (decision_id, _, _), = recorded(1)
    result = run(capsys, "feedback", decision_id, *argv)
    assert result.code == 2 and message in result.error_line
    assert verdicts() == []


def test_feedback_on_an_unknown_ref_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    recorded(1)
    result = run(capsys, "feedback", "nobody", "--approve")
    assert result.code == 2 and "unknown ref 'nobody': no decision, execution" in result.error_line


def test_import_feedback_reads_langsmith_jsonl_and_skips_duplicates(
        capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    runs = recorded(4)
    lines = [
        {"id": "f1", "run_id": runs[0][2], "key": "user", "score": True,
         "created_at": "2026-01-01T00:00:00Z"},
        {"id": "f2", "run_id": runs[1][2], "key": "user", "score": 0,
         "comment": "no", "created_at": "2026-01-01T00:00:01Z"},
        {"id": "f3", "decision_id": runs[2][0], "key": "judge", "score": 7.3, "value": None},
        {"id": "f4", "record_id": runs[3][1], "key": "user", "value": False},
        {"id": "f1", "run_id": runs[0][2], "key": "user", "score": True},  # repeated
    ]
    path = workdir / "feedback.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first = run(capsys, "import-feedback", str(path), "--json")
    assert first.code == 0, first.err
    assert first.json()["imported"] == 4 and first.json()["duplicates_skipped"] == 1
    again = run(capsys, "import-feedback", str(path), "--json")
    assert again.json()["imported"] == 0 and again.json()["duplicates_skipped"] == 5
    assert sorted(r["key"] for r in verdicts()) == ["judge", "user", "user", "user"]
    with AgentRouter.from_config("router.yaml") as router:
        assert sum(p.pending for p in router.profiles("chat")) == 0
        counts = [router.trust_layer.book.counts(a, "chat") for a in ("a", "b")]
        assert sum(c.approvals for c in counts) == 2  # f1, and f3 (7.3 on 1-10 is 0.7)
        assert sum(c.rejections for c in counts) == 2


def test_import_feedback_of_rows_without_ids_twice_stores_them_once(
        capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    (_, _, run_id), (_, _, other) = recorded(2)
    same = {"run_id": run_id, "key": "user", "score": 0.1}  # no id, no created_at
    path = workdir / "feedback.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in (
        same, same, {"run_id": other, "key": "user", "score": 0.3})))
    first = run(capsys, "import-feedback", str(path), "--json").json()
    assert (first["imported"], first["duplicates_skipped"]) == (3, 0)  # repeats count
    newer = run(capsys, "feedback", run_id, "--score", "0.8", "--key", "user", "--json")
    assert newer.code == 0, newer.err
    again = run(capsys, "import-feedback", str(path), "--json").json()
    assert (again["imported"], again["duplicates_skipped"]) == (0, 3)
    assert len(verdicts()) == 4  # nothing stored again, and the newer verdict stands
    with AgentRouter.from_config("router.yaml") as router:
        assert sorted(p.avg_quality for p in router.profiles("chat")
                      if p.executions_total) in ([0.3, 0.8], [0.55])


def test_import_feedback_checks_the_whole_file_first(
        capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    runs = recorded(2)
    path = workdir / "feedback.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "run_id", "key", "score", "value", "comment", "created_at"])
        writer.writerow(["f1", runs[0][2], "user", "true", "", "", ""])
        writer.writerow(["f2", runs[1][2], "user", "1.7", "", "", ""])  # out of range
    result = run(capsys, "import-feedback", str(path))
    assert result.code == 2
    assert f"{path}:3: score must be <= 1.0" in result.error_line
    assert verdicts() == []  # the good first row was not written either
    path.write_text(f"id,run_id,score\nf1,{runs[0][2]},1\nf2,elsewhere,0\n")
    unknown = run(capsys, "import-feedback", str(path))
    assert unknown.code == 2 and "unknown ref 'elsewhere'" in unknown.error_line
    assert verdicts() == []
    ref = json.dumps(runs[0][2])
    for line, said in ((f'{{"run_id": [{ref}], "score": 1}}', ":1: run_id: expected text"),
                       (f'{{"run_id": {ref}, "score": 1, "created_at": "9999-12-31T00:00:00Z"}}',
                        ":1: created_at: 9999-12-31T00:00:00Z is "),
                       (f'{{"run_id": {ref}, "score": 1, "score": 0}}',
                        ":1: key 'score' is given twice")):
        bad = workdir / "bad.jsonl"
        bad.write_text(line + "\n")
        refused = run(capsys, "import-feedback", str(bad))
        assert refused.code == 2 and said in refused.error_line, refused.err
    assert verdicts() == []
    skipped = run(capsys, "import-feedback", str(path), "--skip-unknown", "--json")
    assert skipped.json()["imported"] == 1 and skipped.json()["unknown_skipped"] == 1


def test_import_feedback_takes_reviews_and_signals_checked_first(
        capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    (_, _, run_id), = recorded(1)
    good = [{"id": "v1", "run_id": run_id, "score": 1},
            {"id": "r1", "kind": "review", "agent_id": "a", "task_type": "chat",
             "approved": True, "comment": "checked by hand",
             "created_at": "2026-01-05T10:00:00Z"},
            {"id": "s1", "kind": "signal", "agent_id": "b", "task_type": "chat",
             "signal": "pattern_contradicted"}]
    for bad, said in (({"kind": "review", "agent_id": "a", "task_type": "chat"},
                       ":4: a review row needs approved"),
                      ({"kind": "review", "agent_id": "a", "task_type": "chat",
                        "approved": "maybe"}, ":4: approved must be true or false"),
                      ({"kind": "signal", "agent_id": "b", "task_type": "chat",
                        "signal": "liked_it"}, ":4: unknown trust signal 'liked_it'"),
                      ({"kind": "signal", "agent_id": "zed", "task_type": "chat",
                        "signal": "pattern_contradicted"},
                       ":4: agent_id: unknown agent 'zed' (unknown_agents: error)"),
                      ({"kind": "review", "agent_id": "zed", "task_type": "chat",
                        "approved": True},
                       ":4: agent_id: unknown agent 'zed' (unknown_agents: error)"),
                      # a verdict on a decision logged elsewhere, exported with its pair
                      ({"decision_id": "elsewhere", "score": 1, "agent_id": "zed",
                        "task_type": "chat"},
                       ":4: agent_id: unknown agent 'zed' (unknown_agents: error)"),
                      ({"kind": "vote", "run_id": run_id, "score": 1},
                       ":4: kind must be feedback, review or signal")):
        path = workdir / "said.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in (*good, bad)))
        refused = run(capsys, "import-feedback", str(path))
        assert refused.code == 2 and said in refused.error_line, refused.err
    assert verdicts() == []  # nothing of a refused file was stored
    path.write_text("".join(json.dumps(row) + "\n" for row in good))
    first = run(capsys, "import-feedback", str(path), "--json").json()
    assert (first["imported"], first["verdicts"], first["reviews"], first["signals"]) == \
        (3, 1, 1, 1)
    assert run(capsys, "import-feedback", str(path), "--json").json()["imported"] == 0
    with AgentRouter.from_config("router.yaml") as router:
        assert router.trust("a", "chat").human == 0.95  # the approving review pins it
        said = {row["id"]: row for row in router.store.repository(TrustRepository).people()}
    assert said["r1"]["at"].isoformat().startswith("2026-01-05T10:00:00")
    assert (said["r1"]["comment"], said["s1"]["signal"]) == ("checked by hand",
                                                             "pattern_contradicted")


def test_verdicts_out_of_a_narrowed_scale_warn_once_per_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentRouter.from_config(tmp_path / "router.yaml") as router:
        for _ in range(5):
            rec = router.record(agent_id="a", task_type="t", success=True, quality=0.5)
            router.feedback(rec.record_id, score=7, key="judge")
    (tmp_path / "narrow.yaml").write_text(CONFIG.replace("[1, 10]", "[0, 1]"))
    result = run(capsys, "profiles", "--config", "narrow.yaml")
    assert result.code == 0
    warnings = [line for line in result.err.splitlines() if "not folded" in line]
    assert len(warnings) == 1, result.err
    assert "key 'judge'" in warnings[0] and "score must be <= 1.0, got 7.0" in warnings[0]

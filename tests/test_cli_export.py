"""``trustroute export``: the log written as files that ``import`` and ``import-feedback``
read back into another store, which then learns what the first one did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute import AgentRouter, ExecutionRecord
from trustroute.router.cli import export as export_command

AGENTS = ["a", "b"]
SMALL = {"recency": {"window_size": 8}}  # windows the back-filled rows fall out of


def learned(url: str) -> dict[tuple[str, str], tuple[object, ...]]:
    """Per pair: what its profile and trust counts say (runs without a quality of their
    own await a verdict: ``pending``)."""
    with AgentRouter(AGENTS, store=url, feedback={"wait_s": 3600}, settings=SMALL) as router:
        return {(p.agent_id, p.task_type): (
            p.executions_total, p.pending, round(p.avg_quality, 12), round(p.expertise, 9),
            router.trust_layer.book.counts(p.agent_id, p.task_type).approvals,
            router.trust(p.agent_id, p.task_type).human,
            router.trust(p.agent_id, p.task_type).composite)
            for p in router.profiles()}


def test_an_exported_store_imported_elsewhere_learns_the_same(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = (f"surrealkv://{tmp_path / name}" for name in ("source", "target"))
    with AgentRouter(AGENTS, store=source, seed=1, feedback={"wait_s": 3600},
                     settings=SMALL) as router:
        for i in range(30):
            decision = router.select("code" if i % 2 else "chat")
            router.record(decision, success=i % 3 != 0, quality=None if i % 5 == 0 else 0.7,
                          cost=0.01, metadata={"i": i}, run_ids=[f"run-{i}"])
        for _ in range(5):  # back-filled history: log order is not timestamp order
            router.record(agent_id="a", task_type="code", success=False, quality=0.1,
                          timestamp=datetime.now(UTC) - timedelta(days=7))
        router.feedback("run-5", score=0.2, comment="late verdict")
        router.feedback("run-10", approved=True)
        router.signal("b", "chat", "pattern_observed_again")
        router.review("a", "code", approved=True, comment="solid")  # pins human at 0.95
        router.review("b", "code", approved=False)
    runs, verdicts = tmp_path / "runs.jsonl", tmp_path / "verdicts.jsonl"
    out = run(capsys, "export", str(runs), "--feedback", str(verdicts), "--store", source,
              "--json")
    assert out.code == 0, out.err
    said = out.json()
    assert (said["executions"], said["verdicts"], said["reviews"], said["signals"],
            said["not_exported"]) == (35, 2, 2, 1, 0)
    for argv in (("import", str(runs)), ("import-feedback", str(verdicts))):
        assert run(capsys, *argv, "--store", target).code == 0
        assert "imported 0" in run(capsys, *argv, "--store", target).out  # twice: once
    assert learned(target) == learned(source)
    # successes without a quality of their own (runs 5, 10, 20, 25), less the two judged
    assert sum(pending for _, pending, *_ in learned(target).values()) == 2
    with AgentRouter(AGENTS, store=target) as router:  # run ids came along: refs still work
        router.feedback("run-20", approved=False)


def test_export_writes_only_new_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      kv_url: str) -> None:
    taken = tmp_path / "taken.jsonl"
    taken.write_text("keep me\n")
    result = run(capsys, "export", str(taken), "--store", kv_url)
    assert result.code == 2 and "exists" in result.error_line
    assert taken.read_text() == "keep me\n"
    missing = run(capsys, "export", str(tmp_path / "no" / "x.jsonl"), "--store", kv_url)
    assert missing.code == 2 and "does not exist" in missing.error_line
    empty = tmp_path / "empty.jsonl"
    nowhere = run(capsys, "export", str(empty), "--store", kv_url)  # no store there (yet)
    assert nowhere.code == 2 and not empty.exists()
    assert nowhere.error_line.startswith(f"there is no store at {kv_url} (nothing was ever "
                                         "recorded there")
    with AgentRouter(AGENTS, store=kv_url):  # a store with nothing in it: an empty file
        pass
    assert run(capsys, "export", str(empty), "--store", kv_url).code == 0
    assert empty.read_text() == ""
    assert [json.loads(line) for line in empty.read_text().splitlines()] == []


def test_a_verdict_on_a_decision_that_never_ran_travels_and_applies_when_it_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Finding s15 #10: the exported verdict named a decision the target never logged;
    import-feedback refused the whole file (or --skip-unknown dropped it)."""
    source, target = (f"surrealkv://{tmp_path / name}" for name in ("source", "target"))
    with AgentRouter(AGENTS, store=source, seed=1, feedback={"wait_s": 3600},
                     settings=SMALL) as router:
        for _ in range(4):
            router.record(router.select("code"), success=True, quality=0.6)
        orphan = router.select("code")  # its task died before record()
        router.flush()
        router.feedback(orphan.decision_id, approved=False, comment="never ran")
    runs, verdicts = tmp_path / "runs.jsonl", tmp_path / "verdicts.jsonl"
    assert run(capsys, "export", str(runs), "--feedback", str(verdicts), "--store",
               source).code == 0
    for argv in (("import", str(runs)), ("import-feedback", str(verdicts))):
        result = run(capsys, *argv, "--store", target)
        assert result.code == 0, result.err
    for url in (source, target):  # the task runs after all, in both stores
        with AgentRouter(AGENTS, store=url, feedback={"wait_s": 3600},
                         settings=SMALL) as router:
            router.record(ExecutionRecord(agent_id=orphan.agent_id, task_type="code",
                                          success=True, decision_id=orphan.decision_id,
                                          record_id="late"))
    def rounded(url: str) -> dict[tuple[str, str], list[object]]:  # "late": two clocks
        return {pair: [round(v, 6) if isinstance(v, float) else v for v in values]
                for pair, values in learned(url).items()}
    assert rounded(target) == rounded(source)
    assert learned(target)[orphan.agent_id, "code"][1] == 0  # the verdict judged it


def test_an_interrupted_export_leaves_no_file_that_looks_complete(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kv_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding s15 #21: Ctrl-C part-way left a short file that a re-run refused to
    replace and that import read as a whole (empty) log."""
    with AgentRouter(AGENTS, store=kv_url) as router:
        router.record(agent_id="a", task_type="t", success=True)

    def interrupted(store: object) -> Iterator[dict[str, object]]:
        yield {"agent_id": "a", "task_type": "t", "success": True}
        raise KeyboardInterrupt

    monkeypatch.setattr(export_command, "execution_rows", interrupted)
    out = tmp_path / "runs.jsonl"
    result = run(capsys, "export", str(out), "--store", kv_url)
    assert result.code == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "db.lock"]
    monkeypatch.undo()
    assert run(capsys, "export", str(out), "--store", kv_url).code == 0  # the re-run works
    assert len(out.read_text().splitlines()) == 1

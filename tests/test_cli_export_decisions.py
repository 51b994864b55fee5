"""``trustroute export --decisions`` and ``import-decisions``: the routing decision log
moves with the store, so ``trustroute calibration`` and the calibrated confidence of new
decisions carry on where they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute import AgentRouter

AGENTS = ["a", "b", "c"]
SKILL = {"a": 0.9, "b": 0.5, "c": 0.2}


def route(url: str, tasks: range, *, outcomes: bool = True) -> None:
    """Routed tasks with (or without) their outcomes."""
    with AgentRouter(AGENTS, store=url, seed=3) as router:
        for i in tasks:
            decision = router.select("code")
            if outcomes:
                router.record(decision, success=(i * 37 % 100) / 100 < SKILL[decision.agent_id])


def calibration(capsys: pytest.CaptureFixture[str], url: str) -> object:
    out = run(capsys, "calibration", "--store", url, "--json")
    assert out.code == 0, out.err
    return out.json()


def export(capsys: pytest.CaptureFixture[str], url: str, runs: Path, decisions: Path
           ) -> dict[str, object]:
    out = run(capsys, "export", str(runs), "--decisions", str(decisions), "--store", url,
              "--json")
    assert out.code == 0, out.err
    return dict(out.json())


def test_a_moved_store_reports_the_same_calibration_and_confidence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = (f"surrealkv://{tmp_path / name}" for name in ("source", "target"))
    route(source, range(60))
    route(source, range(5), outcomes=False)  # decisions still waiting for an outcome
    runs, decisions = tmp_path / "runs.jsonl", tmp_path / "decisions.jsonl"
    said = export(capsys, source, runs, decisions)
    assert (said["decisions"], said["decisions_not_exported"]) == (65, 0)

    assert run(capsys, "import", str(runs), "--store", target).code == 0
    out = run(capsys, "import-decisions", str(decisions), "--store", target, "--json")
    assert out.code == 0, out.err
    assert (out.json()["decisions"], out.json()["outcomes_joined"]) == (65, 0)
    again = run(capsys, "import-decisions", str(decisions), "--store", target)
    assert "imported 0 decisions" in again.out and "65 already there" in again.out
    assert calibration(capsys, target) == calibration(capsys, source)
    # a router on the moved store calibrates its confidence as the source's would
    confidence = []
    for url in (source, target):
        with AgentRouter(AGENTS, store=url, seed=9) as router:
            confidence.append(router.select("code").confidence)
    assert confidence[0] == pytest.approx(confidence[1])


def test_outcomes_recorded_after_an_export_join_their_decisions_on_the_next(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = (f"surrealkv://{tmp_path / name}" for name in ("source", "target"))
    with AgentRouter(AGENTS, store=source, seed=3) as router:
        waiting = [router.select("code") for _ in range(8)]
    early = export(capsys, source, tmp_path / "r1.jsonl", tmp_path / "early.jsonl")
    assert early["decisions"] == 8
    with AgentRouter(AGENTS, store=source, seed=3) as router:
        for decision in waiting[:5]:
            router.record(decision, success=decision.agent_id == "a")
    export(capsys, source, tmp_path / "r2.jsonl", tmp_path / "late.jsonl")

    assert run(capsys, "import-decisions", str(tmp_path / "early.jsonl"), "--store",
               target).code == 0
    late = run(capsys, "import-decisions", str(tmp_path / "late.jsonl"), "--store", target,
               "--json")
    assert (late.json()["decisions"], late.json()["outcomes_joined"]) == (0, 5)
    # the older file again: an outcome once joined stays
    assert run(capsys, "import-decisions", str(tmp_path / "early.jsonl"), "--store",
               target).code == 0
    assert calibration(capsys, target) == calibration(capsys, source)


def test_a_bad_decision_row_stops_the_import_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = (f"surrealkv://{tmp_path / name}" for name in ("source", "target"))
    route(source, range(6))
    path = tmp_path / "decisions.jsonl"
    export(capsys, source, tmp_path / "runs.jsonl", path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[3]["confidence"] = 1.5
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run(capsys, "import-decisions", str(path), "--store", target)
    assert out.error_line.startswith(
        f"{path}:4: confidence: expected a value less than or equal to 1")
    rows[3]["confidence"], rows[1]["task_type"] = 0.5, "code "
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run(capsys, "import-decisions", str(path), "--store", target)
    assert out.error_line.startswith(
        f"{path}:2: task_type: task_type must not start or end with white space")
    rows[1]["task_type"], rows[5]["candidates"][0]["reason"] = "code", "a\x00b"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run(capsys, "import-decisions", str(path), "--store", target)
    assert out.error_line == (  # the store could not send such text back: refused
        f"{path}:6: candidates[0].reason must not contain a NUL character")
    assert "no decisions" in run(capsys, "calibration", "--store", target).out


def test_export_without_decisions_says_how_many_it_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = f"surrealkv://{tmp_path / 'source'}"
    route(source, range(4))
    out = run(capsys, "export", str(tmp_path / "runs.jsonl"), "--store", source)
    assert out.code == 0, out.err
    assert "4 routing decisions not exported (--decisions FILE writes them)" in \
        " ".join(out.out.split())

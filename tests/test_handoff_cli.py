"""``trustroute calibrate-handoff`` and ``trustroute handoffs`` through the real entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import run
from test_handoff_calibration import synthetic

from trustroute.profiles.store import Store
from trustroute.router import AgentRouter
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest


def write_examples(path: Path, n: int = 300, seed: int = 21) -> Path:
    lines = [json.dumps({"scores": s, "needs_human": h}) for s, h in synthetic(n, seed)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "router.yaml"
    path.write_text("store: surrealkv://db\nagents: [bot]\n", encoding="utf-8")
    return path


def test_calibrate_prints_thresholds_next_to_the_reference(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = write_examples(tmp_path / "labelled.jsonl")
    result = run(capsys, "calibrate-handoff", str(examples), "--config", str(config))
    assert result.code == 0, result.err
    assert "reference" in result.out and "calibrated" in result.out
    assert "score_threshold" in result.out and "0.7000" in result.out
    assert "with probability 95%" in result.out


def test_calibrate_json_matches_the_library(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = write_examples(tmp_path / "labelled.jsonl")
    result = run(
        capsys, "calibrate-handoff", str(examples), "-c", str(config), "--json",
        "--target-recall", "0.95",
    )  # fmt: skip
    assert result.code == 0, result.err
    data = result.json()
    expected = RetrievalConfidence.calibrate(synthetic(300, 21), target_recall=0.95)
    assert data["settings"]["score_threshold"] == pytest.approx(expected.config.score_threshold)
    assert data["report"]["recall"] >= 0.95 and data["report"]["target_recall"] == 0.95


def test_calibrate_with_name_saves_for_the_config(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = write_examples(tmp_path / "labelled.jsonl")
    result = run(capsys, "calibrate-handoff", str(examples), "-c", str(config), "--name", "kb")
    assert result.code == 0, result.err
    assert "saved as 'kb'" in result.out
    config.write_text(
        "store: surrealkv://db\nagents: [bot]\nhandoff:\n  calibration: kb\n", encoding="utf-8"
    )
    with AgentRouter.from_config(config) as router:
        assert router.transfer is not None
        named = RetrievalConfidence.from_section(router.transfer.settings, router.store)
    assert named.calibration is not None
    assert named.config.score_threshold == pytest.approx(
        RetrievalConfidence.calibrate(synthetic(300, 21)).config.score_threshold
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"scores": [0.9], "needs_human": false}\n{oops\n', "labelled.jsonl:2: not valid JSON"),
        ('{"scores": [0.9]}\n', 'labelled.jsonl:1: expected an object with "scores"'),
        ('{"scores": [0.9], "needs_human": false}\n', "both needs-human and covered"),
        ('{"scores": [0.9, "x"], "needs_human": true}\n', r"example 0: scores\[1\]"),
        ("\n\n", "no examples"),
    ],
)
def test_calibrate_bad_files_are_one_line_errors(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "labelled.jsonl"
    path.write_text(content, encoding="utf-8")
    result = run(capsys, "calibrate-handoff", str(path), "-c", str(config))
    assert result.code == 2
    assert re.search(message, result.error_line)


def test_missing_file(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "calibrate-handoff", "/no/such/file.jsonl", "-c", str(config))
    assert result.code == 2 and "cannot read" in result.error_line


def test_handoffs_resolve_by_prefix_and_status_filters(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = run(capsys, "handoffs", "-c", str(config))
    assert empty.code == 0 and "no pending hand-offs" in empty.out
    with AgentRouter.from_config(config) as router:
        dispatcher = TransferDispatcher(store=router.store)
        request = TransferRequest(reason="no hook", task_type="cards")
        dispatcher.dispatch(request)
    listed = run(capsys, "handoffs", "-c", str(config))
    assert request.request_id[:8] in listed.out
    assert "no transfer hooks" in listed.out  # the error column wraps on narrow terminals
    resolved = run(capsys, "handoffs", "-c", str(config), "--resolve", request.request_id[:8])
    assert resolved.code == 0 and f"resolved {request.request_id}" in resolved.out
    assert run(capsys, "handoffs", "-c", str(config), "--json").json() == []
    every = run(capsys, "handoffs", "-c", str(config), "--status", "all", "--json").json()
    assert [r["status"] for r in every] == ["resolved"]
    unknown = run(capsys, "handoffs", "-c", str(config), "--resolve", "zzz")
    assert unknown.code == 2 and "no stored hand-off request 'zzz'" in unknown.error_line


def test_stats_when_nothing_recorded(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "handoffs", "-c", str(config), "--stats")
    assert result.code == 0 and "no hand-off decisions recorded" in result.out


def test_help_texts(capsys: pytest.CaptureFixture[str]) -> None:
    assert "needs_human" in run(capsys, "calibrate-handoff", "--help").out
    assert "--retry" in run(capsys, "handoffs", "--help").out


def test_store_option_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"surrealkv://{tmp_path / 'other'}"
    with Store(url) as store:
        TransferDispatcher(store=store).dispatch(TransferRequest(reason="x"))
    result = run(capsys, "handoffs", "--store", url, "--json")
    assert result.code == 0 and len(result.json()) == 1

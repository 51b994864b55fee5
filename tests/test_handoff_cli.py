"""``trustroute calibrate-handoff`` and ``trustroute handoffs`` through the real entry point."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import run
from test_handoff_calibration import synthetic

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher, TransferRequest


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
    odd = run(capsys, "calibrate-handoff", str(examples), "-c", str(config), "--name", "k\x1bb")
    assert odd.code == 2
    assert "calibration name must not contain control characters" in odd.error_line


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"scores": [0.9], "needs_human": false}\n{oops\n', "labelled.jsonl:2: not valid JSON"),
        ('{"scores": [0.9]}\n', 'labelled.jsonl:1: expected an object with "scores"'),
        ('{"scores": [0.9], "needs_humn": true}\n', "needs_human\"; unknown key 'needs_humn' "
         r"\(did you mean 'needs_human'\?\)"),
        ('{"scores": [0.9], "needs_human": false}\n', "both needs-human and covered"),
        ('{"scores": [0.9, "x"], "needs_human": true}\n', r"labelled.jsonl:1: scores\[1\]"),
        ('{"scores": [0.9], "needs_human": true}\n{"scores": [0.2], "needs_human": "no"}\n',
         "labelled.jsonl:2: needs_human must be true or false"),
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


def test_a_csv_file_is_told_the_format_and_saturating_scores_are_an_error(
        tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "labelled.csv"
    csv.write_text("scores,needs_human\n0.9,false\n", encoding="utf-8")
    result = run(capsys, "calibrate-handoff", str(csv), "-c", str(config))
    assert result.code == 2 and "reads JSONL" in result.error_line
    raw = tmp_path / "bm25.jsonl"  # scores far above 1: every confidence is 1.0
    raw.write_text("".join(f'{{"scores": [{s}], "needs_human": {str(s < 9).lower()}}}\n'
                           for s in (3, 5, 7, 11, 14, 20)), encoding="utf-8")
    result = run(capsys, "calibrate-handoff", str(raw), "-c", str(config), "--name", "x")
    assert result.code == 2 and "have confidence 1.0" in result.error_line


def test_missing_file(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "calibrate-handoff", "/no/such/file.jsonl", "-c", str(config))
    assert result.code == 2 and "cannot read" in result.error_line


def test_handoffs_resolve_by_prefix_and_status_filters(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = run(capsys, "handoffs", "-c", str(config))
    assert empty.code == 0 and "no pending hand-offs" in empty.out
    with AgentRouter.from_config(config) as router:
        dispatcher = TransferDispatcher(store=router.store, delivery="sync")
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
    again = run(capsys, "handoffs", "-c", str(config), "--resolve", request.request_id[:8])
    assert again.code == 0 and "was resolved already; nothing changed" in again.out
    unknown = run(capsys, "handoffs", "-c", str(config), "--resolve", "zzz")
    assert unknown.code == 2 and "no stored hand-off request 'zzz'" in unknown.error_line


def test_stored_control_characters_are_shown_escaped_never_sent_to_the_terminal(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row stored before control characters were refused (or a free-text reason with
    them) prints as visible escapes: the listing cannot clear or retitle the terminal."""
    with AgentRouter.from_config(config) as router:
        request = TransferRequest(reason="r").payload() | {"task_type": "card\x1b[2J"}
        router.store.repository(HandoffRepository).save_pending(
            request, hook="desk", error="down\x1b]0;pwned\x07")
    listed = run(capsys, "handoffs", "-c", str(config))
    assert listed.code == 0
    assert "\x1b" not in listed.out and "\x07" not in listed.out
    assert "\\x1b]0;pwned" in listed.out.replace("\n", "")


def test_stats_when_nothing_recorded(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "handoffs", "-c", str(config), "--stats")
    assert result.code == 0 and "no hand-off decisions recorded" in result.out


def test_help_texts(capsys: pytest.CaptureFixture[str]) -> None:
    assert "needs_human" in run(capsys, "calibrate-handoff", "--help").out
    assert "metadata, run_ids." in " ".join(run(capsys, "import", "--help").out.split())
    assert "--retry" in run(capsys, "handoffs", "--help").out


def test_store_option_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"surrealkv://{tmp_path / 'other'}"
    with Store(url) as store:
        TransferDispatcher(store=store, delivery="sync").dispatch(TransferRequest(reason="x"))
    result = run(capsys, "handoffs", "--store", url, "--json")
    assert result.code == 0 and len(result.json()) == 1


APP_HOOKS = '''
from pathlib import Path


def open_ticket(request):
    with open(Path(__file__).resolve().parents[1] / "tickets.txt", "a") as tickets:
        tickets.write(request.request_id + "\\n")
    return "ticket opened"
'''


@pytest.fixture
def app_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An application as a new user lays it out: its package next to its router.yaml,
    and that folder not on the import path (no PYTHONPATH=.)."""
    app = tmp_path / "helpdesk"
    (app / "helpdesk_app").mkdir(parents=True)
    (app / "helpdesk_app" / "__init__.py").write_text("", encoding="utf-8")
    (app / "helpdesk_app" / "hooks.py").write_text(APP_HOOKS, encoding="utf-8")
    (app / "router.yaml").write_text(
        "store: surrealkv://db\n"
        "agents: [bot]\n"
        "hooks:\n"
        "  - type: callable\n"
        "    target: helpdesk_app.hooks:open_ticket\n",
        encoding="utf-8",
    )
    here = {"", ".", str(app)}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in here])
    monkeypatch.chdir(app)
    yield app
    for module in ("helpdesk_app.hooks", "helpdesk_app"):
        sys.modules.pop(module, None)


def test_a_callable_hook_of_the_app_needs_no_pythonpath(
    app_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # commands that deliver nothing do not import the hook at all
    for command in (["profiles"], ["handoffs"], ["handoffs", "--stats"]):
        result = run(capsys, *command)
        assert result.code == 0, (command, result.err)
    assert "helpdesk_app" not in sys.modules

    request = TransferRequest(reason="no answer in the FAQ", task_type="cards")
    with Store(f"surrealkv://{app_folder / 'db'}") as store:  # the desk was down
        down = CallableHook(lambda r: 1 / 0, name="open_ticket")
        TransferDispatcher([down], store=store, attempts=1, delivery="sync").dispatch(request)
    # the hook is imported when it is first used, from the config file's folder, wherever
    # the command runs
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    config = str(app_folder / "router.yaml")
    retried = run(capsys, "handoffs", "--config", config, "--retry")
    assert retried.code == 0, retried.err
    assert "1 delivered, 0 still pending" in retried.out
    tickets = (app_folder / "tickets.txt").read_text(encoding="utf-8").split()
    assert tickets == [request.request_id]
    assert run(capsys, "handoffs", "--config", config, "--json").json() == []


def test_a_callable_hook_that_cannot_be_imported_says_what_to_do(
    app_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = app_folder / "router.yaml"
    config.write_text(
        config.read_text(encoding="utf-8").replace("helpdesk_app.hooks", "helpdesk_ap.hooks"),
        encoding="utf-8",
    )
    request = TransferRequest(reason="no answer in the FAQ")
    with Store(f"surrealkv://{app_folder / 'db'}") as store:
        down = CallableHook(lambda r: 1 / 0, name="open_ticket")
        TransferDispatcher([down], store=store, attempts=1, delivery="sync").dispatch(request)
    assert run(capsys, "profiles").code == 0  # loading the config imports nothing
    retried = run(capsys, "handoffs", "--retry")
    assert retried.code == 0 and "0 delivered, 1 still pending" in retried.out
    error = run(capsys, "handoffs", "--json").json()[0]["error"]
    assert "cannot import it (No module named 'helpdesk_ap')" in error
    assert f"looked on sys.path and in {app_folder}" in error
    assert "set PYTHONPATH to the folder that holds it" in error

    config.write_text("hooks:\n  - type: callable\n    target: helpdesk_app/hooks.py\n")
    bad = run(capsys, "profiles")
    assert bad.code == 2
    assert "hooks.0.callable.target" in bad.error_line
    assert "write 'package.module:function'" in bad.error_line

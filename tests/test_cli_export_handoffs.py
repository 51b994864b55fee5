"""``trustroute export --handoffs`` and ``import-handoffs``: moving a store loses no
hand-off. Transfers in every state, the decision log and saved calibrations reach the
other store, whose own workers then deliver what was still pending."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run
from handoff_helpers import faq_store
from langchain_core.runnables import RunnableLambda

from trustroute.integrations.langchain.handoff import HandoffResult, HandoffRunnable
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher

CONFIDENCE = RetrievalConfidence(score_threshold=0.4)  # the toy embedder scores low
QUESTIONS = ["can I buy bitcoin with crypto", "my card has not arrived",
             "what is the weather on mars", "how do I top up my account with a bank transfer"]


def refuse(request: Any) -> None:
    raise ConnectionError("the ticket desk is down")


def source_store(url: str) -> tuple[list[str], dict[str, Any]]:
    """A store with a delivered, a pending and a resolved hand-off, answered questions
    and a saved calibration: (the hand-offs' request ids, the hand-off state)."""
    handed = []
    with Store(url) as store:
        hooks = TransferDispatcher([CallableHook(lambda r: None, name="log"),
                                    CallableHook(refuse, name="desk")], store=store,
                                   delivery="sync")
        rag = HandoffRunnable(faq_store(), RunnableLambda(lambda x: "ok"),
                              confidence=CONFIDENCE, store=store, hooks=hooks)
        for question in QUESTIONS:
            out = rag.invoke(question)
            if isinstance(out, HandoffResult):
                handed.append(out.request.request_id)
        hooks.close()
        repo = store.repository(HandoffRepository)
        repo.set_status(handed[-1], "resolved")  # a person took it: both hooks' rows
        examples = [([0.9, 0.8], False), ([0.2, 0.1], True)] * 10
        CONFIDENCE.calibrate(examples, target_recall=0.9).save(store, "faq")
        return handed, state(store)


def state(store: Store) -> dict[str, Any]:
    """What the store holds of hand-offs, comparable across stores."""
    repo = store.repository(HandoffRepository)
    rows = sorted(repo.pending(status=None, limit=1000),
                  key=lambda r: (r["request_id"], r["hook"]))
    return {"rows": [{k: v for k, v in r.items() if k != "updated_at"} for r in rows],
            "decisions": repo.decision_stats(), "calibration": repo.load_calibration("faq")}


def test_a_moved_store_keeps_every_hand_off_and_delivers_the_pending_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = (f"surrealkv://{tmp_path / name}" for name in ("source", "target"))
    handed, before = source_store(source)
    assert len(handed) == 2 and before["calibration"] is not None
    assert [r["status"] for r in before["rows"] if r["request_id"] == handed[0]] == \
        ["pending", "delivered"]  # desk, log

    runs, handoffs = tmp_path / "runs.jsonl", tmp_path / "handoffs.jsonl"
    out = run(capsys, "export", str(runs), "--handoffs", str(handoffs), "--store", source,
              "--json")
    assert out.code == 0, out.err
    assert {k: out.json()[k] for k in ("handoffs", "pending_handoffs", "handoff_decisions",
                                       "calibrations", "handoffs_not_exported")} == \
        {"handoffs": 4, "pending_handoffs": 1, "handoff_decisions": 4, "calibrations": 1,
         "handoffs_not_exported": 0}

    first = run(capsys, "import-handoffs", str(handoffs), "--store", target, "--json")
    assert first.code == 0, first.err
    assert first.json() | {"file": "", "store": ""} == {
        "file": "", "store": "", "rows": 9, "handoffs": 4, "moved_forward": 0,
        "handoff_decisions": 4, "calibrations": 1}
    again = run(capsys, "import-handoffs", str(handoffs), "--store", target)
    assert again.code == 0 and "imported 0 hand-off rows" in again.out
    assert "9 already there" in again.out
    with Store(target) as store:
        assert state(store) == before
        # the target's worker, with the desk up again, delivers what the source could not
        got: list[str] = []
        TransferDispatcher([CallableHook(lambda r: got.append(r.request_id), name="desk")],
                           store=store).retry_pending()
        assert got == [handed[0]]
        assert store.repository(HandoffRepository).pending() == []


def test_an_import_moves_rows_forward_never_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = (f"surrealkv://{tmp_path / name}" for name in ("source", "target"))
    handed, _ = source_store(source)
    older, newer = tmp_path / "older.jsonl", tmp_path / "newer.jsonl"
    assert run(capsys, "export", str(tmp_path / "r1.jsonl"), "--handoffs", str(older),
               "--store", source).code == 0
    with Store(source) as store:
        store.repository(HandoffRepository).set_status(handed[0], "resolved")
    assert run(capsys, "export", str(tmp_path / "r2.jsonl"), "--handoffs", str(newer),
               "--store", source).code == 0

    assert run(capsys, "import-handoffs", str(older), "--store", target).code == 0
    out = run(capsys, "import-handoffs", str(newer), "--store", target, "--json")
    assert out.json()["moved_forward"] == 2  # the request's log and desk rows
    assert run(capsys, "import-handoffs", str(older), "--store", target).code == 0
    with Store(target) as store:
        rows = store.repository(HandoffRepository).pending(status=None)
    assert {r["status"] for r in rows} == {"resolved"}  # the older file reopened nothing


def test_export_without_handoffs_says_what_it_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = f"surrealkv://{tmp_path / 'source'}"
    source_store(source)
    out = run(capsys, "export", str(tmp_path / "runs.jsonl"), "--store", source)
    assert out.code == 0, out.err
    assert ("4 hand-off rows (1 pending), 4 hand-off decisions, 1 calibration not "
            "exported (--handoffs FILE writes them)") in " ".join(out.out.split())
    same = run(capsys, "export", str(tmp_path / "a.jsonl"), "--handoffs",
               str(tmp_path / "a.jsonl"), "--store", source)
    assert same.error_line == ("FILE, --feedback, --handoffs and --decisions must name "
                               "different files")


def good_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    source = f"surrealkv://{tmp_path / 'source'}"
    source_store(source)
    path = tmp_path / "handoffs.jsonl"
    assert run(capsys, "export", str(tmp_path / "runs.jsonl"), "--handoffs", str(path),
               "--store", source).code == 0
    return [json.loads(line) for line in path.read_text().splitlines()]


def edit(**changes: Any) -> Any:
    """A change to a row: keys set, or removed where the value is ``...``."""
    def apply(row: dict[str, Any]) -> None:
        for key, value in changes.items():
            if value is ...:
                row.pop(key)
            else:
                row[key] = value
    return apply


@pytest.mark.parametrize(("kind", "change", "error"), [
    ("handoff", edit(kind="ticket"), "kind: expected 'handoff', 'decision' or 'calibration'"),
    ("handoff", edit(hook=...), "hook: required key is missing"),
    ("handoff", edit(hook=" desk"), "hook: hook must not start or end with white space"),
    ("handoff", edit(status="lost"), "status: expected 'pending', 'delivered' or 'resolved'"),
    ("handoff", edit(request_id="other"),
     "request.request_id must be the row's request_id ('other')"),
    ("decision", edit(created_at="2026-01-01T00:00:00"),
     "created_at: expected a time with its zone (Z or +HH:MM), got '2026-01-01T00:00:00'"),
    ("decision", edit(transferred="yes"), "transferred: expected a valid boolean"),
    ("decision", edit(confidence=1.5), "confidence: expected a value less than or equal to 1"),
    ("decision", edit(reason="a\x00b"), "reason must not contain a NUL character"),
    ("handoff", edit(error="\ud800"), "error holds '\\ud800', a lone surrogate"),
    ("calibration", edit(settings="fast"), "settings: expected a valid dictionary"),
    ("calibration", edit(extra=1), "extra: unknown key 'extra'"),
])
def test_a_bad_row_stops_the_import_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, change: Any,
        error: str) -> None:
    rows = good_rows(tmp_path, capsys)
    line = next(i for i, r in enumerate(rows) if r["kind"] == kind)
    change(rows[line])
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    target = f"surrealkv://{tmp_path / 'target'}"
    out = run(capsys, "import-handoffs", str(path), "--store", target)
    assert out.code != 0
    assert out.error_line.startswith(f"{path}:{line + 1}: {error}"), out.error_line
    with Store(target) as store:  # the good rows before it were not written either
        assert store.repository(HandoffRepository).pending(status=None) == []
        assert store.repository(HandoffRepository).decision_stats() == []

"""What the commands print: tables that fit 80 columns whole, and counted nouns in English."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import Result, isolate, run

from trustroute import AgentRouter
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher, TransferRequest

LONG_AGENT = "a-rather-long-agent-name-x"  # 26 characters
LONG_TASK = "customer-support-escalation"  # 27 characters


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate(tmp_path, monkeypatch, columns=80)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store with long names, reviews, hand-off decisions and a pending request."""
    url = f"surrealkv://{tmp_path_factory.mktemp('history') / 'db'}"
    agents = ["generalist", LONG_AGENT, "coder"]
    with AgentRouter(agents, store=url, seed=1) as router:
        for i in range(12):
            for task_type in ("code", LONG_TASK):
                decision = router.select(task_type)
                router.record(decision, success=i % 3 != 0, quality=0.7,
                              latency_ms=123_456.0)
        router.review("coder", "code", False, "broke the build")
        repo = router.store.repository(HandoffRepository)
        for task_type in ("code", LONG_TASK):
            repo.record_decision(task_type=task_type, transferred=True, confidence=0.4,
                                 insufficient=False, reason="low confidence")
        TransferDispatcher(store=router.store).dispatch(
            TransferRequest(reason="no hook", task_type=LONG_TASK))
    return url


def fits(result: Result, *headers: str) -> str:
    """The output, checked: nothing cut, no line past 80 columns, every header whole."""
    assert result.code == 0, result.err
    assert "…" not in result.out, result.out
    assert max(len(line) for line in result.out.splitlines()) <= 80, result.out
    words = result.out.split()
    for header in headers:
        for word in header.split():
            assert word in words, f"header {header!r} cut or missing:\n{result.out}"
    return result.out


def test_store_tables_fit_80_columns(capsys: pytest.CaptureFixture[str], history: str) -> None:
    store = ("--store", history)
    out = fits(run(capsys, "profiles", *store), "agent", "runs", "success", "quality",
               "expertise", "conf.", "adjusted", "latency", "updated", "decisions",
               "handed off", "rate", "mean confidence")
    assert "2.1 min" in out  # 123,456 ms, in a unit that suits it
    fits(run(capsys, "trust", *store), "task type", "agent", "obs", "contra", "freq",
         "effect", "human", "composite", "tier")
    fits(run(capsys, "route", "code", *store), "agent", "final", "strategy", "expertise",
         "conf.", "adjusted", "runs", "load")
    fits(run(capsys, "calibration", *store), "bucket", "predicted", "realised", "count",
         "gap")
    fits(run(capsys, "handoffs", "--stats", *store), "task type", "decisions",
         "handed off", "rate", "mean confidence")
    for status in ("pending", "all"):
        out = fits(run(capsys, "handoffs", "--status", status, *store), "request", "age",
                   "hook", "task type", "tries")
        assert "customer-support" in out and "escalation" in out  # folded, not cut


@pytest.mark.parametrize("columns", [50, 60])
def test_narrow_terminals_leave_out_right_columns_and_say_so(
        capsys: pytest.CaptureFixture[str], history: str, monkeypatch: pytest.MonkeyPatch,
        columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    for argv, first in ((("profiles",), "agent"), (("trust",), "task type"),
                        (("route", "code"), "agent")):
        result = run(capsys, *argv, "--store", history)
        assert result.code == 0, result.err
        assert max(len(line) for line in result.out.splitlines()) <= columns, result.out
        assert first.split()[0] in result.out.split() and "coder" in result.out
        assert "not shown at this width: " in result.out, result.out


@pytest.fixture(scope="module")
def short_names(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store of short names: a table that almost fits 60 columns."""
    url = f"surrealkv://{tmp_path_factory.mktemp('short') / 'db'}"
    with AgentRouter(["coder", "generalist", "budget", "writer", "analyst"], store=url,
                     seed=1) as router:
        for i in range(15):
            router.record(router.select("code"), success=i % 4 != 0, quality=0.7)
    return url


@pytest.mark.parametrize("columns", [50, 60])
@pytest.mark.parametrize("store", ["history", "short_names"])
def test_narrow_trust_tables_keep_composite_and_tier_and_cut_no_header(
        capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch, columns: int, store: str) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = run(capsys, "trust", "--store", request.getfixturevalue(store))
    assert result.code == 0, result.err
    assert max(len(line) for line in result.out.splitlines()) <= columns, result.out
    text = " ".join(result.out.split())
    left_out = text.split("not shown at this width: ")[1].split(" (--json")[0].split(", ")
    words = result.out.split()
    for header in ("composite", "tier", "freq", "effect", "human", "obs", "contra"):
        assert header in words or header in left_out, f"{header!r} cut:\n{result.out}"
    assert "composite" in words and "tier" in words, result.out  # the point of the table
    assert "contra" in left_out  # the least telling goes first


@pytest.mark.parametrize("columns", [60, 80])
def test_the_handoffs_table_wraps_its_text_whole_words_and_fits(
        capsys: pytest.CaptureFixture[str], kv_url: str, monkeypatch: pytest.MonkeyPatch,
        columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    reason = "sparse_evidence: only 0 candidate(s) have outcomes for 'code'; 3 needed"
    error = "WebhookError: POST failed after 1 attempt(s): connection refused"
    with AgentRouter(["a"], store=kv_url) as router:
        request = TransferRequest(reason=reason, task_type="code").payload()
        router.store.repository(HandoffRepository).save_pending(request, hook="webhook",
                                                                error=error)
    result = run(capsys, "handoffs", "--store", kv_url)
    assert result.code == 0, result.err
    assert max(len(line) for line in result.out.splitlines()) <= columns, result.out
    words = result.out.split()
    for word in f"{reason} {error} request age hook task type tries reason / last error".split():
        assert word in words, f"{word!r} cut:\n{result.out}"
    assert kv_url in "".join(words)  # the heading is a line: a long path folds, whole


def test_demo_and_replay_tables_fit_80_columns(capsys: pytest.CaptureFixture[str],
                                               workdir: Path) -> None:
    fits(run(capsys, "demo", "-n", "60", "--store", "mem://"), "agent", "routed", "quality",
         "hidden", "runs", "expertise", "conf.", "adjusted")
    log = workdir / "outcomes.csv"
    log.write_text("agent,task_type,task,quality\n" + "".join(
        f"{agent},{LONG_TASK},t{t},{0.9 if agent == 'coder' else 0.4}\n"
        for t in range(10) for agent in ("coder", LONG_AGENT, "generalist")))
    fits(run(capsys, "replay", str(log), "--runs", "2"), "strategy", "mean quality",
         "% of oracle", "final regret", "oracle's pick", "most chosen agents")


@pytest.mark.parametrize("columns", [60, 80])
def test_replay_never_cuts_a_strategy_or_agent_name(capsys: pytest.CaptureFixture[str],
                                                    workdir: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    log = workdir / "outcomes.csv"
    agents = ("mistral-orpo-beta", "llama-2-70b-chat-hf", "coder")
    log.write_text("agent,task_type,task,quality\n" + "".join(
        f"{agent},code,t{t},{0.9 if agent == 'coder' else 0.4}\n"
        for t in range(10) for agent in agents))
    out = run(capsys, "replay", str(log), "--runs", "1", "-S",
              "knowledge_gradient,confidence_weighted").out
    assert max(len(line) for line in out.splitlines()) <= columns, out
    words = out.split()
    assert "knowledge_gradient" in words and "confidence_weighted" in words, out
    if columns == 80:  # every agent shown is shown whole
        shown = [w for w in words if w.startswith(("mistral", "llama", "coder"))]
        assert shown and set(shown) <= set(agents), out
    else:  # no room for the agents' names: their column is left out, and said so
        assert "not shown at this width: most chosen agents" in " ".join(words), out
    helped = run(capsys, "replay", "--help").out.split()  # the default wraps between names
    assert "knowledge_gradient," in helped and "confidence_weighted," in helped


def test_counts_are_singular_when_one(capsys: pytest.CaptureFixture[str],
                                      workdir: Path, kv_url: str) -> None:
    recorded = run(capsys, "record", "a", "t", "--success", "--store", kv_url)
    assert "profile: 1 run, success 100%" in recorded.out
    log = workdir / "one.jsonl"
    log.write_text(json.dumps({"agent_id": "b", "task_type": "t", "success": True}) + "\n")
    imported = run(capsys, "import", str(log), "--store", kv_url)
    assert imported.out.startswith("imported 1 execution from ")
    assert imported.out.rstrip().endswith("skipped 0 duplicates")
    again = run(capsys, "import", str(log), "--store", kv_url)
    assert again.out.startswith("imported 0 executions from ")
    assert again.out.rstrip().endswith("skipped 1 duplicate")
    decay = run(capsys, "decay", "--store", kv_url)
    assert "(0 executions archived)" in decay.out
    outcomes = workdir / "outcomes.csv"
    outcomes.write_text("agent,task_type,task,quality\na,x,t1,1\n")
    replayed = run(capsys, "replay", str(outcomes), "--runs", "1", "-S", "random")
    assert "1 agent, 1 task, 1 task type; 1 run x 1 agent" in " ".join(replayed.out.split())


def test_profiles_show_the_hand_off_rate_of_an_app_that_routes_nothing(
        capsys: pytest.CaptureFixture[str], kv_url: str) -> None:
    with AgentRouter(["a"], store=kv_url) as router:  # HandoffRunnable logs, no routing
        router.store.repository(HandoffRepository).record_decision(
            task_type="billing", transferred=True, confidence=0.2, insufficient=False,
            reason="low confidence")
    out = run(capsys, "profiles", "--store", kv_url).out
    assert out.startswith("no profiles in ")
    assert "hand-off rate by task type" in out and "billing" in out


def test_a_long_hook_error_is_shown_cut_with_an_ellipsis(
        capsys: pytest.CaptureFixture[str], kv_url: str) -> None:
    def refuse(request: TransferRequest) -> None:
        raise RuntimeError("the desk is closed " * 20)

    with AgentRouter(["a"], store=kv_url) as router:
        TransferDispatcher([CallableHook(refuse, name="desk")], store=router.store,
                           attempts=1, delivery="sync").dispatch(TransferRequest(reason="r"))
    listed = run(capsys, "handoffs", "--store", kv_url, "--json").json()
    assert len(listed[0]["error"]) > 160  # kept whole
    out = " ".join(run(capsys, "handoffs", "--store", kv_url).out.split())
    assert "the desk is closed" in out and "…" in out


def test_no_handoffs_of_any_status_reads_as_english(capsys: pytest.CaptureFixture[str],
                                                    kv_url: str) -> None:
    listed = run(capsys, "handoffs", "--status", "all", "--store", kv_url)
    assert listed.out.startswith("no hand-offs in ")
    pending = run(capsys, "handoffs", "--store", kv_url)
    assert pending.out.startswith("no pending hand-offs in ")

"""`trustroute init`, `route`, `record` and `profiles` against real embedded stores."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from cli_helpers import isolate, run

from trustroute.profiles.store import Store
from trustroute.profiles.store.decisions import DecisionRepository
from trustroute.router import AgentRouter
from trustroute.router.config.example import EXAMPLE_CONFIG
from trustroute.router.trust.abstention import Abstained


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate(tmp_path, monkeypatch)


def test_init_writes_the_example_and_refuses_to_overwrite(
        capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    result = run(capsys, "init")
    assert result.code == 0 and "router.yaml" in result.out
    config = workdir / "router.yaml"
    assert config.read_text() == EXAMPLE_CONFIG
    config.write_text("# mine\n")
    again = run(capsys, "init")
    assert again.code == 2
    assert "already exists" in again.error_line and "--force" in again.error_line
    assert config.read_text() == "# mine\n"  # untouched
    forced = run(capsys, "init", "--force", "--json")
    assert forced.code == 0 and forced.json()["written"] is True
    assert config.read_text() == EXAMPLE_CONFIG
    nested = run(capsys, "init", "conf/router.yml")
    assert nested.code == 0 and (workdir / "conf" / "router.yml").exists()
    assert run(capsys, "init", "router.toml").error_line.endswith("*.yaml or *.yml")


def test_init_then_route_uses_the_written_config(capsys: pytest.CaptureFixture[str],
                                                 workdir: Path) -> None:
    assert run(capsys, "init").code == 0
    result = run(capsys, "route", "support", "--json")
    assert result.code == 0, result.err
    decision = result.json()
    # writer, generalist, budget accept support; coder (code, math) and analyst do not
    assert {c["agent_id"] for c in decision["candidates"]} == {"writer", "generalist",
                                                                 "budget"}
    assert not (workdir / ".trustroute").exists()  # a preview creates no store ...
    assert run(capsys, "record", "writer", "support", "--success").code == 0
    assert (workdir / ".trustroute" / "db").exists()  # ... a write creates the default


def test_route_shows_ranked_candidates_with_components_and_reasons(
        capsys: pytest.CaptureFixture[str], kv_url: str) -> None:
    with AgentRouter(agents=["a", "b", "c"], store=kv_url) as r:
        for _ in range(10):
            r.record(agent_id="a", task_type="code", success=True, quality=0.8)
        r.record(agent_id="b", task_type="code", success=True, quality=0.95)
    result = run(capsys, "route", "code", "--store", kv_url, "--strategy",
                 "confidence_weighted", "-a", "a", "-a", "b", "-a", "c", "--json")
    assert result.code == 0, result.err
    d = result.json()
    assert d["agent_id"] == "a" and d["strategy"] == "confidence_weighted"
    assert [c["agent_id"] for c in d["candidates"]] == ["a", "b", "c"]
    top = d["candidates"][0]
    assert top["confidence"] == pytest.approx(0.5)  # 10 of 20 runs
    assert top["adjusted_score"] == pytest.approx(0.4)  # the reference case: 0.80 x 0.50
    assert d["candidates"][1]["adjusted_score"] == pytest.approx(0.0475)  # 0.95 x 0.05
    for key in ("expertise", "confidence", "adjusted_score", "load", "final_score", "reason"):
        assert key in top
    table = run(capsys, "route", "code", "--store", kv_url, "--strategy",
                "confidence_weighted")
    assert table.code == 0
    assert "route code → a" in table.out
    assert "1. a: expertise 0.80 x confidence 0.50" in table.out
    excluded = run(capsys, "route", "code", "--store", kv_url, "-x", "a", "--json").json()
    assert "a" not in [c["agent_id"] for c in excluded["candidates"]]


def test_route_is_a_preview_that_logs_no_decision(capsys: pytest.CaptureFixture[str],
                                                  kv_url: str) -> None:
    assert run(capsys, "route", "code", "-a", "x", "--store", kv_url).code == 0
    with Store(kv_url) as store:
        assert store.repository(DecisionRepository).count() == 0
    with AgentRouter(agents=["x"], store=kv_url) as r:  # whereas a real select() is logged
        r.select("code")
    with Store(kv_url) as store:
        assert store.repository(DecisionRepository).count() == 1


@pytest.mark.parametrize("on_abstain", ["human", "raise"])
def test_route_and_demo_hand_nothing_to_a_person(capsys: pytest.CaptureFixture[str],
                                                  workdir: Path, on_abstain: str) -> None:
    """A preview and a simulation show an abstention; they do not carry it out."""
    config = workdir / "router.yaml"
    config.write_text(f"store: surrealkv://db\nagents: [a, b]\nabstention:\n"
                      f"  on_abstain: {on_abstain}\n  sparse_evidence: {{enabled: true}}\n"
                      "hooks:\n  - type: logging\n")
    preview = run(capsys, "route", "code", "-c", str(config))
    assert preview.code == 0, preview.err
    assert "The router abstains (sparse_evidence)" in " ".join(preview.out.split())
    assert run(capsys, "route", "code", "-c", str(config), "--json").json()["abstained"]
    assert run(capsys, "demo", "-c", str(config), "--tasks", "30").code == 0
    every = run(capsys, "handoffs", "-c", str(config), "--status", "all", "--json")
    assert every.code == 0 and every.json() == []
    carried_out = pytest.raises(Abstained) if on_abstain == "raise" else \
        contextlib.nullcontext()  # whereas select() carries it out
    with AgentRouter(agents=["a", "b"], store="mem://", abstention={
            "on_abstain": on_abstain, "sparse_evidence": {"enabled": True}}) as r, \
            carried_out:
        assert r.select("code").abstained


def test_route_with_explicit_agents_and_no_config(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "route", "code", "--store", "mem://", "-a", "x", "-a", "y", "--json")
    assert result.code == 0
    assert sorted(c["agent_id"] for c in result.json()["candidates"]) == ["x", "y"]


def test_record_then_profiles_persist_across_invocations(
        capsys: pytest.CaptureFixture[str], kv_url: str) -> None:
    first = run(capsys, "record", "coder", "code", "--success", "--quality", "0.8",
                "--latency-ms", "1200", "--cost", "0.01", "--store", kv_url)
    assert first.code == 0, first.err
    assert "recorded coder on code: success" in first.out
    second = run(capsys, "record", "coder", "code", "--failure", "--store", kv_url, "--json")
    assert second.code == 0
    body = second.json()
    assert body["stored"] is True and body["record"]["quality"] == 0.0
    assert body["profile"]["executions_total"] == 2
    assert body["profile"]["executions_successful"] == 1
    listed = run(capsys, "profiles", "--store", kv_url, "--json").json()
    assert len(listed) == 1
    p = listed[0]
    assert (p["agent_id"], p["task_type"], p["executions_total"]) == ("coder", "code", 2)
    assert p["avg_quality"] == pytest.approx(0.4)
    assert p["avg_latency_ms"] == pytest.approx(600.0)
    assert p["confidence"] == pytest.approx(0.1)
    assert p["last_updated"] is not None


def test_record_is_idempotent_by_record_id(capsys: pytest.CaptureFixture[str],
                                           kv_url: str) -> None:
    args = ("record", "a", "t", "--record-id", "retry-1", "--store", kv_url)
    assert run(capsys, *args, "--success", "--json").json()["stored"] is True
    again = run(capsys, *args, "--success")
    assert again.code == 0 and "already stored" in again.out
    # a retry that says otherwise changes nothing, and --json shows what is stored
    other = run(capsys, *args, "--failure", "--quality", "0.1", "--json").json()
    assert other["stored"] is False
    assert (other["record"]["success"], other["record"]["quality"]) == (True, 1.0)
    assert run(capsys, "profiles", "--store", kv_url, "--json").json()[0][
        "executions_total"] == 1


def test_record_uses_the_config_cost_and_decision_id(capsys: pytest.CaptureFixture[str],
                                                     workdir: Path) -> None:
    (workdir / "router.yaml").write_text(
        "store: surrealkv://state\nagents:\n  - {id: paid, cost_per_call: 0.25}\n")
    body = run(capsys, "record", "paid", "t", "--success", "--decision-id", "d-1",
               "--json").json()
    assert body["record"]["cost"] == 0.25
    assert body["record"]["decision_id"] == "d-1"
    assert (workdir / "state").exists()


@pytest.mark.parametrize(("args", "expected"), [
    (("record", "a", "t"), "say how it went: --success or --failure"),
    (("record", "a", "t", "--success", "--quality", "2"), "quality: quality must be <= 1.0"),
    (("record", "a", "t", "--failure", "--latency-ms", "-5"), "latency_ms must be >= 0"),
    (("record", "a", "t", "--success", "--cost", "nan"), "cost must be a finite number"),
    (("record", "a", "t", "--success", "--quality", "good"), "'good' is not a valid float"),
    (("record", "", "t", "--success"), "agent_id: agent_id must not be empty"),
    (("record", "a" * 257, "t", "--success"), "the limit is 256"),
])
def test_record_bad_input_is_one_line_and_stores_nothing(
        capsys: pytest.CaptureFixture[str], kv_url: str, args: tuple[str, ...],
        expected: str) -> None:
    result = run(capsys, *args, "--store", kv_url)
    assert result.code == 2
    assert expected in result.error_line
    assert run(capsys, "profiles", "--store", kv_url, "--json").json() == []


def test_hostile_ids_round_trip_through_the_cli(capsys: pytest.CaptureFixture[str],
                                                kv_url: str) -> None:
    agent, task = "o'brien\"; DELETE profile; --", "代码 [bold]审查[/]"
    assert run(capsys, "record", agent, task, "--success", "--store", kv_url).code == 0
    listed = run(capsys, "profiles", "--store", kv_url, "--json").json()
    assert [(p["agent_id"], p["task_type"]) for p in listed] == [(agent, task)]
    shown = run(capsys, "profiles", "--store", kv_url)
    assert agent in shown.out and "[bold]审查[/]" in shown.out  # markup printed verbatim
    routed = run(capsys, "route", task, "--store", kv_url, "--json").json()
    assert routed["agent_id"] == agent  # adopted from the store: no agents configured


def test_profiles_table_and_filters(capsys: pytest.CaptureFixture[str], kv_url: str) -> None:
    with AgentRouter(store=kv_url) as r:
        for agent, task, ok in (("a", "code", True), ("a", "math", False),
                                ("b", "code", True), ("b", "code", True)):
            r.record(agent_id=agent, task_type=task, success=ok, latency_ms=1500.0)
    table = run(capsys, "profiles", "--store", kv_url)
    assert table.code == 0
    for header in ("agent", "runs", "success", "quality", "expertise", "conf.", "adjusted",
                   "latency", "updated"):
        assert header in table.out
    titles = [line.strip() for line in table.out.splitlines() if line.strip() in ("code", "math")]
    assert titles == ["code", "math"]  # one table per task type
    assert "1.5 s" in table.out and "ago" in table.out
    code_only = run(capsys, "profiles", "-t", "code", "--store", kv_url, "--json").json()
    assert [(p["agent_id"], p["executions_total"]) for p in code_only] == [("b", 2), ("a", 1)]
    a_only = run(capsys, "profiles", "--agent", "a", "--store", kv_url, "--json").json()
    assert sorted(p["task_type"] for p in a_only) == ["code", "math"]
    none = run(capsys, "profiles", "-t", "poetry", "--store", kv_url)
    assert none.code == 0 and "no profiles matching the filters" in none.out


def test_route_without_any_agent_is_a_clear_error(capsys: pytest.CaptureFixture[str],
                                                  workdir: Path) -> None:
    result = run(capsys, "route", "code", "--store", "mem://")
    assert result.code == 2
    assert result.error_line.startswith("no agents to route to: list them under `agents:` "
                                        "in router.yaml (`trustroute init` writes one)")
    (workdir / "s.yaml").write_text("store: mem://\n")
    named = run(capsys, "route", "code", "-c", "s.yaml")  # the file given, not router.yaml
    assert named.code == 2
    assert named.error_line.startswith("no agents to route to: list them under `agents:` "
                                       "in s.yaml, pass --agent")


def test_route_when_no_agent_accepts_the_task_type(capsys: pytest.CaptureFixture[str],
                                                   workdir: Path) -> None:
    (workdir / "router.yaml").write_text(
        "store: mem://\nagents:\n  - {id: coder, task_types: [code]}\n")
    result = run(capsys, "route", "poetry")
    assert result.code == 2
    assert result.error_line.startswith("no agent available for task type 'poetry'")

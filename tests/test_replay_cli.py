"""``trustroute replay`` end to end, and a slice of the real development log."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from trustroute.router.cli.app import main
from trustroute.router.replay import load_outcomes, outcomes_from_rows, replay

DEV_LOG = Path(__file__).resolve().parents[2] / "shared" / "data" / "alpaca_eval_gpt4" / \
    "outcomes.csv"


@pytest.fixture
def small_log(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    skill = {"a": 0.2, "b": 0.85, "c": 0.5}
    path = tmp_path / "outcomes.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["agent", "task_type", "task", "quality", "latency_ms"])
        for t in range(40):
            for agent, p in skill.items():
                writer.writerow([agent, "xy"[t % 2], f"t{t}", float(rng.random() < p), 100])
    return path


def test_replay_json_side_by_side(small_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", str(small_log), "--runs", "2", "--seed", "3", "--json",
                 "-S", "thompson,random", "-p", "thompson.half_life_executions=50"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["strategy"] for s in data["strategies"]] == ["thompson", "random"]
    assert data["settings"]["strategies"][0]["params"] == {"half_life_executions": 50}
    assert data["settings"]["runs"] == 2 and data["settings"]["file"] == str(small_log)
    for s in data["strategies"]:
        assert 0 < s["pct_oracle"]["mean"] <= 150
        assert s["regret_curve"]["regret"][-1] == pytest.approx(s["final_regret"]["mean"])
        assert sum(a["share"] for a in s["agents_chosen"]) == pytest.approx(1.0)


def test_replay_table_drift_and_plot(small_log: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "regret.png"
    code = main(["replay", str(small_log), "--runs", "2", "--drift", "--agents", "3",
                 "--plot", str(plot)])
    out = capsys.readouterr().out
    assert code == 0
    assert "regression-aware per-task-type oracle" in out
    for name in ("knowledge_gradient", "thompson", "confidence_weighted", "random"):
        assert name[:12] in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("args", "needle"), [
    (["-S", "thompson,bogus"], "unknown strategy 'bogus'"),
    (["-p", "thompson.half_life=3"], "unknown parameter 'half_life'"),
    (["--feedback-rate", "1.5"], "--feedback-rate"),
    (["-p", "lower_bound.z=2"], "'lower_bound' is not among the replayed strategies"),
    (["-p", "z"], "expected STRATEGY.KEY=VALUE"),
    (["-p", "half_life_executions=["], "'half_life_executions=[': VALUE is not a YAML"),
    (["-p", "half_life_executions=*a"], "VALUE is not a YAML value (found undefined alias"),
    (["-p", "half_life_executions={a: 1"], "VALUE is not a YAML value"),
    (["--agents", "7"], "agents must be between 1 and 3"),
    (["--plot", "/no/such/folder/r.png"], "the folder /no/such/folder does not exist"),
])
def test_replay_errors_are_one_line(small_log: Path, args: list[str], needle: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", str(small_log), "--runs", "1", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1, err  # exactly one line


def test_one_run_reports_no_spread(small_log: Path, capsys: pytest.CaptureFixture[str]
                                   ) -> None:
    assert main(["replay", str(small_log), "--runs", "1", "-S", "random", "--json"]) == 0
    (random,) = json.loads(capsys.readouterr().out)["strategies"]
    assert random["pct_oracle"]["sd"] is None and random["pct_oracle"]["ci95"] is None
    assert main(["replay", str(small_log), "--runs", "1", "-S", "random"]) == 0
    assert "±" not in capsys.readouterr().out


def test_replay_of_a_bad_log_names_the_line(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("agent,task_type,task,quality\na,x,t1,2\n")
    assert main(["replay", str(bad)]) == 2
    assert "bad.csv:2: quality must be in [0, 1]" in capsys.readouterr().err
    bad.write_text("agent,task_type,task,quality\na,x,t1,1\nb,x,t1,1\n b ,x,t2,1\n")
    assert main(["replay", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {bad}:4: agent: agent must not start or end with white space, got ' b '"]


@pytest.mark.skipif(not DEV_LOG.exists(), reason="development log not available")
def test_a_slice_of_the_development_log() -> None:
    # two task types, their first 30 tasks, every agent: learning must beat random
    log = load_outcomes(DEV_LOG)
    keep = []
    for kind in ("koala", "vicuna"):
        keep += [i for i, t in enumerate(log.task_types) if t == kind][:30]
    rows = [{"agent": agent, "task_type": log.task_types[i], "task": log.tasks[i],
             "quality": float(log.quality[i, j])}
            for i in keep for j, agent in enumerate(log.agents)
            if not np.isnan(log.quality[i, j])]
    part = outcomes_from_rows(rows)
    report = replay(part, ["thompson", "random"], runs=2, agents=8, seed=0)
    for summary in report.summaries.values():
        assert 0 < summary.pct_oracle["mean"] <= 100
        assert summary.oracle_quality > 0.8
    assert sum(len(r.chosen) for r in report.results["thompson"]) == 2 * 60


def test_replay_with_late_partial_feedback(small_log: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", str(small_log), "--runs", "2", "--json", "-S", "knowledge_gradient",
                 "--feedback-rate", "0.25", "--feedback-delay", "10"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["feedback_rate"] == 0.25
    assert data["settings"]["feedback_delay"] == 10
    assert 0 < data["strategies"][0]["pct_oracle"]["mean"] <= 150

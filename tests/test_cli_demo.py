"""`trustroute demo`: a small simulated workload end to end, on real embedded stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run

from trustroute.router import AgentRouter
from trustroute.router.demo import DEFAULT_WORKLOAD
from trustroute.router.strategies import DEFAULT_STRATEGY


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "160")
    return tmp_path


def test_demo_on_the_default_store_prints_leaderboards_and_the_comparison(
        capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    result = run(capsys, "demo", "--tasks", "80")
    assert result.code == 0, result.err
    out = result.out
    assert f"strategy {DEFAULT_STRATEGY}" in out  # whatever the library default is
    for task_type in DEFAULT_WORKLOAD.task_types:
        assert f"{task_type}: settled on " in out
    assert "routed mean quality" in out and "best single agent generalist" in out
    assert "random" in out and "of oracle" in out and "learning curve" in out
    assert "trustroute profiles" in out  # points at the persisted profiles
    assert "80/80" in result.err  # the progress bar, on stderr
    with AgentRouter(store=f"surrealkv://{workdir / '.trustroute' / 'db'}") as r:
        assert r.store.executions.count() == 80  # recorded on the embedded default store


def test_demo_json_is_consistent_and_reproducible(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("demo", "-n", "100", "--seed", "3", "--store", "mem://", "--json")
    first = run(capsys, *args)
    assert first.code == 0, first.err
    data = first.json()
    assert data["tasks"] == 100 and data["seed"] == 3 and data["store"] == "mem://"
    assert data["executions_before"] == 0
    assert set(data["leaderboard"]) == set(DEFAULT_WORKLOAD.task_types)
    routed = sum(row["routed"] for rows in data["leaderboard"].values() for row in rows)
    assert routed == 100
    for rows in data["leaderboard"].values():
        assert sum(row["is_best"] for row in rows) == 1
        assert [row["rank"] for row in rows] == list(range(1, len(rows) + 1))
    assert data["random_quality"] < data["best_single_quality"] < data["oracle_quality"]
    assert 0.0 < data["routed_expected_quality"] <= data["oracle_quality"]
    assert len(data["learning_curve"]) == 4
    assert run(capsys, *args).json()["routed_quality"] == data["routed_quality"]


def test_demo_learns_across_runs_and_takes_a_strategy(capsys: pytest.CaptureFixture[str],
                                                      kv_url: str) -> None:
    first = run(capsys, "demo", "-n", "40", "--store", kv_url, "--json")
    assert first.code == 0 and first.json()["executions_before"] == 0
    second = run(capsys, "demo", "-n", "40", "--store", kv_url, "--strategy",
                 "confidence_weighted")
    assert second.code == 0, second.err
    assert "strategy confidence_weighted" in second.out
    assert "already held 40 executions" in second.out
    assert f"--store {kv_url}" in second.out


def test_demo_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    unknown = run(capsys, "demo", "--store", "mem://", "--strategy", "psychic")
    assert unknown.code == 2 and "unknown strategy 'psychic'" in unknown.error_line
    assert run(capsys, "demo", "--tasks", "0").code == 2
    bad_store = run(capsys, "demo", "--store", "gopher://x")
    assert bad_store.code == 2 and "not supported" in bad_store.error_line

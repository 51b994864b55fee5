"""The weekly decay job and the trust CLI commands, on real embedded stores."""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import DuplicateRecord
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router import AgentRouter
from trustroute.router.cli.app import main
from trustroute.router.trust.lifecycle import run_decay
from trustroute.router.trust.scores import Tier

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)  # Monday of ISO week 2025-W10


def seed_good_and_bad(r: AgentRouter) -> None:
    """'good' succeeds 25 times, 'bad' fails twice, all on T0."""
    for i in range(25):
        r.record(agent_id="good", task_type="code", success=True, quality=0.9,
                 timestamp=T0 + timedelta(minutes=i))
    for i in range(2):
        r.record(agent_id="bad", task_type="code", success=False,
                 timestamp=T0 + timedelta(minutes=i))


def _marks(repo: TrustRepository) -> list[dict[str, Any]]:
    """The lifecycle job's rows, by pair."""
    return sorted(repo.lifecycle(), key=lambda m: (m["agent_id"], m["task_type"]))


def test_decay_twice_in_one_week_changes_nothing_the_second_time() -> None:
    with AgentRouter(agents=["good", "bad"], store="mem://", seed=0) as r:
        seed_good_and_bad(r)
        before = r.trust("good", "code")
        now = T0 + timedelta(days=8)  # unseen for 8 days; Tuesday of 2025-W11
        first = run_decay(r, now=now)
        assert (first.week, first.decayed, first.deprecated, first.deleted) == \
            ("2025-W11", 2, 1, 0)
        after = r.trust("good", "code")
        assert before.frequency - after.frequency == pytest.approx(0.02)
        assert before.effectiveness - after.effectiveness == pytest.approx(0.01)
        assert before.human - after.human == pytest.approx(0.005)
        repo = r.store.repository(TrustRepository)
        marks = _marks(repo)
        assert [(m["agent_id"], m["deprecated_at"] is not None) for m in marks] == [
            ("bad", True), ("good", False)]
        counts = r.trust_layer.book.all_counts()
        history = repo.history("good", "code")
        second = r.decay(now=now + timedelta(days=3))  # Friday, same week
        assert second.already_applied
        assert (second.decayed, second.deprecated, second.deleted) == (0, 0, 0)
        assert _marks(repo) == marks
        assert r.trust_layer.book.all_counts() == counts
        assert repo.history("good", "code") == history
        assert r.trust("good", "code") == after
        assert history[-1]["reason"] == "decay: unseen"


def test_a_retired_pair_is_archived_with_every_field_of_its_executions() -> None:
    with AgentRouter(agents=["good", "bad"], store="mem://", seed=0) as r:
        seed_good_and_bad(r)
        r.record(agent_id="bad", task_type="code", success=False, run_ids=["run-1"],
                 metadata={"k": 1}, timestamp=T0)  # a LangChain run, no quality given
        live = {e["record_id"]: {k: v for k, v in e.items() if k != "id"} for e in
                r.store.executions.iter_executions(agent_id="bad", task_type="code")}
        reports = [run_decay(r, now=T0 + timedelta(days=d)) for d in (8, 43, 80)]
        assert sum(report.archived_executions for report in reports) == 3
        archived = r.store.repository(TrustRepository).archived_executions("bad", "code")
        assert {e["record_id"]: {k: v for k, v in e.items() if k != "archived_at"}
                for e in archived} == live
        assert [(e["quality_given"], e["run_ids"]) for e in archived if e.get("run_ids")] == [
            (False, ["run-1"])]  # the archive keeps what feedback resolved it by


def test_fresh_evidence_lifts_decay_and_recent_pairs_are_not_decayed() -> None:
    with AgentRouter(agents=["good", "bad"], store="mem://", seed=0) as r:
        seed_good_and_bad(r)
        run_decay(r, now=T0 + timedelta(days=8))
        decayed = r.trust("good", "code")
        r.record(agent_id="good", task_type="code", success=True, quality=0.9,
                 timestamp=T0 + timedelta(days=9))
        fresh = r.trust("good", "code")
        assert fresh.frequency == pytest.approx(0.95)
        assert fresh.effectiveness > decayed.effectiveness
        report = run_decay(r, now=T0 + timedelta(days=10, hours=12))  # Thursday, still 2025-W11
        assert report.already_applied
        report = run_decay(r, now=T0 + timedelta(days=14))  # 2025-W12, seen 5 days ago
        r.flush()
        assert report.decayed == 1  # only 'bad'
        assert r.trust("good", "code") == fresh


def test_a_run_back_in_time_is_refused_so_no_pair_skips_its_grace(kv_url: str) -> None:
    with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
        seed_good_and_bad(r)
        with pytest.raises(ValueError, match=r"now: 2025-01-01T00:00:00Z is before the "
                                             r"newest evidence \(2025-03-03T09:24:00Z\)"):
            run_decay(r, now=datetime(2025, 1, 1, tzinfo=UTC))  # marks dated before it
        assert run_decay(r, now=T0 + timedelta(days=8)).deprecated == 1
        with pytest.raises(ValueError, match="before the last decay run"):
            run_decay(r, now=T0 + timedelta(days=6))  # the week before
        assert run_decay(r, now=T0 + timedelta(days=9)).deleted == 0  # forward is fine
        assert r.trust("bad", "code").tier == Tier.DEPRECATED  # still within its grace
    assert _cli("decay", "--now", "2024-06-01T00:00:00Z", "-s", kv_url) == 2
    with AgentRouter(agents=["good"], store="mem://") as r:
        stamp = datetime.now(UTC)
        r.record(agent_id="good", task_type="code", success=True,  # admitted: within
                 timestamp=stamp + timedelta(seconds=290))  # max_clock_skew_s (300)
        # run by a process whose clock is 100 s behind the writer's: not refused
        assert not run_decay(r, now=stamp - timedelta(seconds=100)).already_applied


def test_deprecated_too_long_is_deleted_and_its_history_archived(kv_url: str) -> None:
    with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
        seed_good_and_bad(r)
        assert run_decay(r, now=T0 + timedelta(days=8)).deprecated == 1
        assert r.trust("bad", "code").tier == Tier.DEPRECATED
        assert run_decay(r, now=T0 + timedelta(days=8 + 21)).deleted == 0  # 21 days
        report = run_decay(r, now=T0 + timedelta(days=8 + 35))
        assert (report.deleted, report.archived_executions) == (1, 2)
        assert report.retired == [("bad", "code")]
        assert r.profile("bad", "code").executions_total == 0  # gone from the live view
        assert r.profile("good", "code").executions_total == 25
    with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
        repo = r.store.repository(TrustRepository)
        archived = repo.archived_executions("bad", "code")
        assert len(archived) == 2 and all(e["success"] is False for e in archived)
        # its evidence and marks are gone from the log: the reopened router holds no pair
        assert r.trust_layer.book.pairs() == [("good", "code")]
        assert [m["agent_id"] for m in repo.lifecycle()] == ["good"]
        history = repo.history("bad", "code")
        last = [h["reason"] for h in history if h["at"] == history[-1]["at"]]
        assert any(reason.startswith("deleted") for reason in last)
        kept = r.store.run("SELECT trust, profile FROM trust_archive "
                           "WHERE agent_id = 'bad';")[0]
        assert kept[0]["trust"]["deprecated_at"] == T0 + timedelta(days=8)  # its marks
        assert kept[0]["profile"]["executions_total"] == 2  # and its last profile
        assert r.store.executions.count() == 25
        assert r.trust("bad", "code").tier == Tier.MODERATE  # a fresh start if it returns


def test_a_mark_survives_reopening_the_store_so_weekly_runs_retire(kv_url: str) -> None:
    """Each weekly run is its own process in a cron job: the mark of the first must be
    found by the last (the engine kept only a pair's decay, written before its mark)."""
    with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
        seed_good_and_bad(r)
    reports = []
    for days in (8, 8 + 21, 8 + 35):
        with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
            reports.append(run_decay(r, now=T0 + timedelta(days=days)))
    assert [(x.deprecated, x.deleted) for x in reports] == [(1, 0), (0, 0), (0, 1)]
    assert reports[-1].retired == [("bad", "code")]


def test_a_second_retirement_counts_only_its_own_executions() -> None:
    with AgentRouter(agents=["bad"], store="mem://") as r:
        counted = []
        for start in (T0, T0 + timedelta(days=70)):
            r.record(agent_id="bad", task_type="code", success=False, timestamp=start)
            run_decay(r, now=start + timedelta(days=8))
            counted.append(run_decay(r, now=start + timedelta(days=8 + 35)))
        assert [(x.deleted, x.archived_executions) for x in counted] == [(1, 1), (1, 1)]
        repo = r.store.repository(TrustRepository)
        assert len(repo.archived_executions("bad", "code")) == 2  # both kept


def test_a_retired_pairs_ids_stay_stored_so_a_rerun_does_not_bring_it_back(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"agent_id": "good", "task_type": "code", "success": True, "quality": 0.9,
             "record_id": f"g{i}", "timestamp": (T0 + timedelta(minutes=i)).isoformat()}
            for i in range(25)]
    rows += [{"agent_id": "bad", "task_type": "code", "success": False, "record_id": f"b{i}",
              "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i in range(2)]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert _cli("import", str(log), "--store", kv_url) == 0
    with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
        for days in (8, 8 + 21, 8 + 35):
            report = r.decay(now=T0 + timedelta(days=days))
        assert report.retired == [("bad", "code")]
    capsys.readouterr()
    assert _cli("import", str(log), "--store", kv_url, "--json") == 0  # the daily re-run
    assert json.loads(capsys.readouterr().out)["imported"] == 0
    with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
        with pytest.raises(DuplicateRecord):  # a retry of a retired pair's record
            r.record(agent_id="bad", task_type="code", success=False, record_id="b0")
        again = [ExecutionRecord(agent_id="bad", task_type="code", success=False,
                                 record_id=f"b{i}") for i in (0, 1)]
        assert r.record_many(again) == 0
        assert r.profile("bad", "code").executions_total == 0
        assert r.store.executions.count() == 25
        assert len(r.store.repository(TrustRepository).archived_executions("bad", "code")) == 2


def _cli(*args: str) -> int:
    return main(list(args))


def test_calibration_over_no_outcomes_is_null_not_perfect(
        kv_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentRouter(agents=["a"], store=kv_url) as r:
        r.select("t")  # a decision, no outcome
    assert _cli("calibration", "--store", kv_url, "--json") == 0
    body = json.loads(capsys.readouterr().out)
    assert body["with_outcome"] == 0
    assert body["brier"] is None and body["ece"] is None  # a mean over nothing


def test_trust_filters_that_match_nothing_say_so(
        kv_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentRouter(agents=["coder"], store=kv_url) as r:
        r.record(agent_id="coder", task_type="code", success=True)
    said = {}
    for argv in (("-t", "nosuch"), ("-a", "codr"), ("-a", "coder", "-t", "nosuch")):
        assert _cli("trust", "--store", kv_url, *argv) == 0
        said[argv] = capsys.readouterr().out
    assert "no trust data of task type 'nosuch'" in said["-t", "nosuch"]
    assert "did you mean 'coder'?" in said["-a", "codr"]
    assert "did you mean" not in said["-a", "coder", "-t", "nosuch"]
    # a bad id given to review is its own error, not first an unlisted-agent warning
    with AgentRouter(agents=["coder"], store=kv_url, unknown_agents="warn") as r, \
            warnings.catch_warnings(record=True) as warned, \
            pytest.raises(ValueError, match="must not be empty"):
        warnings.simplefilter("always")
        r.review("", "code", approved=False)
    assert not [w for w in warned if "does not list" in str(w.message)]


def test_cli_review_decay_trust_and_calibration(kv_url: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with AgentRouter(agents=["good", "bad"], store=kv_url, seed=0) as r:
        for _ in range(30):
            d = r.select("code")
            r.record(d, success=d.agent_id == "good", quality=0.9)
    assert _cli("review", "good", "code", "--approve", "-m", "solid", "-s", kv_url) == 0
    assert "0.950" in capsys.readouterr().out
    assert _cli("trust", "-s", kv_url, "--json") == 0
    rows = {r["agent_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["good"]["human"] == 0.95 and rows["good"]["reviewed"] is True
    assert _cli("decay", "--now", "2030-01-07T00:00:00", "-s", kv_url) == 0
    assert "2 decayed" in capsys.readouterr().out
    assert _cli("decay", "--now", "2030-01-08T00:00:00", "-s", kv_url) == 0
    assert "already applied for 2030-W02" in capsys.readouterr().out
    assert _cli("calibration", "-s", kv_url) == 0
    out = capsys.readouterr().out
    for word in ("bucket", "predicted", "realised", "count", "Brier", "ECE",
                 "abstention rate", "abstained that failed"):
        assert word in out
    assert _cli("calibration", "-s", kv_url, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["with_outcome"] == 30
    assert sum(b["count"] for b in report["reliability"]) == 30
    assert 0.0 <= report["ece"] <= 1.0


def test_cli_review_needs_a_verdict(kv_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli("review", "good", "code", "-s", kv_url) != 0
    assert "--approve or --reject" in capsys.readouterr().err
    assert _cli("decay", "--now", "yesterday", "-s", kv_url) == 2


def test_old_history_is_deleted_only_30_days_after_the_job_deprecated_it() -> None:
    """Importing old history must not archive a pair on the first run: the 30 days count
    from when the job marked it, not from its last evidence."""
    with AgentRouter(agents=["good", "bad"], store="mem://", seed=0) as r:
        seed_good_and_bad(r)  # 'bad' failed twice at T0, 40 days before the first run
        first = r.decay(now=T0 + timedelta(days=40))
        assert (first.deprecated, first.deleted, first.archived_executions) == (1, 0, 0)
        assert r.trust("bad", "code").tier == Tier.DEPRECATED
        assert r.profile("bad", "code").executions_total == 2  # kept during its grace
        assert r.decay(now=T0 + timedelta(days=40 + 28)).deleted == 0
        last = r.decay(now=T0 + timedelta(days=40 + 35))
        assert (last.deleted, last.archived_executions) == (1, 2)
        assert last.retired == [("bad", "code")]
        assert r.trust("good", "code").tier != Tier.DEPRECATED  # decayed, still kept
        assert r.profile("good", "code").executions_total == 25

"""The log is the truth, also across crashes: SIGKILL during ``record()``,
``record_many()`` and ``trustroute import`` (20 kills each, real processes, one embedded
on-disk store), and a full disk, lose nothing that was acknowledged, and a reopened
router's profiles and trust counts equal what the stored rows say.

The expected projections are computed here from the stored rows alone (executions and
``trust_feedback``), independently of the package's folding code.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import isolate, run

from trustroute.profiles.records import ExecutionRecord
from trustroute.profiles.store import StoreError
from trustroute.profiles.store.trust import TrustRepository
from trustroute.router import AgentRouter

WORKER = Path(__file__).with_name("crash_worker.py")
AGENTS = ["a", "b", "c"]
KILLS = 20
POSITIVE_QUALITY = 0.5  # a success at or above this quality is positive evidence
COUNTED = ("observations", "contradictions", "positive", "negative", "neutral",
           "approvals", "rejections")
# what each signal the worker sends adds (trustroute.router.trust.scores.SIGNALS)
SIGNAL_COUNTS = {"user_accepted": "approvals", "user_corrected": "rejections"}

pytestmark = pytest.mark.slow


# -- what the log says, computed from the stored rows ------------------------------------
def expected_profiles(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    """(executions, successes) per pair, counted from execution rows."""
    found: Counter[tuple[str, str]] = Counter()
    wins: Counter[tuple[str, str]] = Counter()
    for row in rows:
        pair = (row["agent_id"], row["task_type"])
        found[pair] += 1
        wins[pair] += bool(row["success"])
    return {pair: (n, wins[pair]) for pair, n in found.items()}


def expected_trust(rows: list[dict[str, Any]], people: list[dict[str, Any]]
                   ) -> dict[tuple[str, str], dict[str, int]]:
    """Trust counters per pair, counted from execution and trust_feedback rows."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    for row in rows:
        c = counts.setdefault((row["agent_id"], row["task_type"]), Counter())
        c["observations"] += 1
        if not row["success"]:
            c["negative"] += 1
        elif row["quality"] >= POSITIVE_QUALITY:
            c["positive"] += 1
        else:
            c["neutral"] += 1
    for row in people:
        c = counts.setdefault((row["agent_id"], row["task_type"]), Counter())
        if row["kind"] == "review":
            c["approvals" if row["approved"] else "rejections"] += 1
        else:
            assert row["kind"] == "signal", row
            c[SIGNAL_COUNTS[row["signal"]]] += 1
    return {pair: {name: c[name] for name in COUNTED} for pair, c in counts.items()}


def assert_projections_equal_the_log(router: AgentRouter) -> list[dict[str, Any]]:
    """The router's profiles and trust counts are exactly what its stored rows say;
    returns the execution rows."""
    rows = list(router.store.executions.iter_executions())
    people = router.store.repository(TrustRepository).people()
    ids = [row["record_id"] for row in rows]
    assert len(ids) == len(set(ids)) == router.store.executions.count()
    profiles = {(p.agent_id, p.task_type): (p.executions_total, p.executions_successful)
                for p in router.profiles()}
    assert profiles == expected_profiles(rows)
    trust = {pair: {name: getattr(c, name) for name in COUNTED}
             for pair, c in router.trust_layer.book.all_counts().items()}
    assert trust == expected_trust(rows, people)
    return rows


# -- the acknowledgement file ------------------------------------------------------------
@dataclass
class Acks:
    """What a worker acknowledged: execution ids, signals and reviews."""

    executions: list[str] = field(default_factory=list)
    said: Counter[tuple[str, ...]] = field(default_factory=Counter)

    @property
    def items(self) -> int:
        return len(self.executions) + sum(self.said.values())


def read_acks(path: Path) -> Acks:
    """Complete lines only: a line the kill cut short was not acknowledged."""
    acks = Acks()
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        kind, *rest = line.split()
        if kind == "x":
            acks.executions.append(rest[0])
        else:
            acks.said[(kind, *rest)] += 1
    return acks


def said_in_log(people: list[dict[str, Any]]) -> Counter[tuple[str, ...]]:
    """trust_feedback rows in the worker's acknowledgement form."""
    said: Counter[tuple[str, ...]] = Counter()
    for row in people:
        if row["kind"] == "signal":
            said[("s", row["agent_id"], row["task_type"], row["signal"])] += 1
        else:
            said[("r", row["agent_id"], row["task_type"], str(int(row["approved"])))] += 1
    return said


def kill_worker_after_acks(mode: str, url: str, acks: Path, prefix: str, seed: int,
                           rng: random.Random, tmp_path: Path) -> None:
    """Start a worker, let it acknowledge a few more items, SIGKILL it at a random
    moment after that."""
    before = read_acks(acks).items
    wanted = before + rng.randint(2, 60)
    errors = tmp_path / "worker.err"
    with errors.open("w") as err:
        child = subprocess.Popen([sys.executable, str(WORKER), mode, url, str(acks), prefix,
                                  str(seed)], stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120  # a hung worker fails the test, never hangs it
        while read_acks(acks).items < wanted:
            assert child.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, "the worker acknowledged too little"
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.02))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL, errors.read_text()


def crash_rounds(mode: str, kv_url: str, tmp_path: Path, in_flight: int) -> Iterator[
        tuple[AgentRouter, Acks, set[str]]]:
    """KILLS rounds of worker + SIGKILL on one store; yields the reopened router, all
    acknowledgements so far and the ids of the round's worker that are stored."""
    rng = random.Random(f"crash-{mode}")
    acks_path = tmp_path / "acks.txt"
    extra_before = 0
    for k in range(KILLS):
        prefix = f"{mode}{k}"
        kill_worker_after_acks(mode, kv_url, acks_path, prefix, k, rng, tmp_path)
        acks = read_acks(acks_path)
        with AgentRouter(agents=AGENTS, store=kv_url, seed=0) as router:
            rows = assert_projections_equal_the_log(router)
            stored = {row["record_id"] for row in rows}
            # every acknowledged execution is stored
            missing = [i for i in acks.executions if i not in stored]
            assert not missing, f"round {k}: acknowledged but lost: {missing[:5]}"
            # every acknowledged signal and review counts
            logged = said_in_log(router.store.repository(TrustRepository).people())
            assert not (acks.said - logged), f"round {k}: lost {acks.said - logged}"
            # what is stored beyond the acknowledgements is what was in flight at a kill
            extra = len(stored) - len(acks.executions) + sum((logged - acks.said).values())
            assert 0 <= extra - extra_before <= in_flight, (k, extra, extra_before)
            extra_before = extra
            assert stored <= {i for i in stored if i.startswith(mode)}
            yield router, acks, {i for i in stored if i.startswith(f"{prefix}-")}


def test_sigkill_during_record_loses_no_acknowledged_write(kv_url: str,
                                                          tmp_path: Path) -> None:
    said = 0
    for _, acks, _ in crash_rounds("record", kv_url, tmp_path, in_flight=1):
        said = sum(acks.said.values())
    assert said > 0  # the kills also fell among signals and reviews


def test_sigkill_during_record_many_loses_no_acknowledged_batch(kv_url: str,
                                                               tmp_path: Path) -> None:
    for _, _, ours in crash_rounds("many", kv_url, tmp_path, in_flight=40):
        # batches are written in order, each all or nothing: the round's stored ids are
        # numbered 0..n-1 with no gap (an unacknowledged batch in flight at most)
        numbers = sorted(int(i.rsplit("-", 1)[1]) for i in ours)
        assert numbers == list(range(len(numbers)))


# -- trustroute import -------------------------------------------------------------------
def trustroute_command() -> list[str]:
    script = Path(sys.executable).with_name("trustroute")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from trustroute.router.cli.app import entry; entry()"]


def store_bytes(db: Path) -> int:
    """Bytes the embedded store's commit log holds so far (0 before it exists)."""
    try:
        return sum(f.stat().st_size for f in os.scandir(db / "clog"))
    except FileNotFoundError:
        return 0


def write_import_file(path: Path, prefix: str, rows: int, rng: random.Random) -> list[str]:
    lines, ids = [], []
    for n in range(rows):
        success = rng.random() < 0.7
        quality = rng.choice((0.2, 0.9)) if success else 0.1
        ids.append(f"{prefix}-{n}")
        lines.append(f'{{"record_id": "{ids[-1]}", "agent_id": "{rng.choice(AGENTS)}", '
                     f'"task_type": "{rng.choice(["code", "math"])}", '
                     f'"success": {str(success).lower()}, "quality": {quality}}}\n')
    path.write_text("".join(lines), encoding="utf-8")
    return ids


def test_sigkill_during_import_keeps_a_prefix_and_a_rerun_completes_the_file(
        kv_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    isolate(tmp_path, monkeypatch)
    env = {k: v for k, v in os.environ.items() if k != "TRUSTROUTE_STORE"}
    db = Path(kv_url.removeprefix("surrealkv://"))
    rng = random.Random("crash-import")
    rows, complete, cut_short = 100, set[str](), 0
    growth = 0  # bytes one whole file adds to the store (measured by the first round)
    for k in range(KILLS + 1):
        path = tmp_path / f"log{k}.jsonl"
        ids = write_import_file(path, f"imp{k}", rows, rng)
        batch = rng.choice((1, 4, 10, 25))
        start = store_bytes(db)
        # the first round runs to the end; the others are killed once the store has grown
        # by a random part of what a whole file adds
        target = start + (rng.uniform(0.02, 0.95) * growth if k else float("inf"))
        child = subprocess.Popen([
            *trustroute_command(), "import", str(path), "--batch-size", str(batch),
            "--store", kv_url, "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
        try:
            while child.poll() is None and store_bytes(db) < target:
                time.sleep(0.001)
        finally:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
            _, err = child.communicate(timeout=60)
        if k == 0:
            assert child.returncode == 0, err
            growth = store_bytes(db) - start
        with AgentRouter(agents=AGENTS, store=kv_url, seed=0) as router:
            stored = {r["record_id"] for r in assert_projections_equal_the_log(router)}
        # the earlier files are complete (re-imported below), and of this file only
        # rows from its start are stored
        assert stored & complete == complete
        kept = stored - complete
        assert kept == set(ids[:len(kept)]), k
        cut_short += 0 < len(kept) < rows
        # importing the file again completes it: every row once (checked by the reopen
        # of the next round, and after the last)
        result = run(capsys, "import", str(path), "--batch-size", str(batch),
                     "--store", kv_url, "--json")
        assert result.code == 0, result.err
        assert (result.json()["imported"], result.json()["duplicates_skipped"]) == (
            rows - len(kept), len(kept))
        complete |= set(ids)
    with AgentRouter(agents=AGENTS, store=kv_url, seed=0) as router:
        stored = {r["record_id"] for r in assert_projections_equal_the_log(router)}
    assert stored == complete
    assert cut_short > 0  # some kills did land in the middle of a file


# -- a full disk -------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs (skipped where mounting is not allowed)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_disk(disk: Path) -> tuple[str, list[str], list[ExecutionRecord]]:
    """Record batches into a store on ``disk`` until a write fails for want of space;
    then free space. Returns the store URL, the acknowledged ids and the failed batch."""
    filler = disk / "filler"
    filler.write_bytes(b"\0" * 1_250_000)  # freed below: room for the store to repair
    url = f"surrealkv://{disk / 'db'}"
    acknowledged: list[str] = []
    failed: list[ExecutionRecord] = []
    rng = random.Random("disk-full")
    router = AgentRouter(agents=AGENTS, store=url, seed=0)
    try:
        for n in range(100_000):
            batch = [ExecutionRecord(record_id=f"d{n}-{i}", agent_id=rng.choice(AGENTS),
                                     task_type="code", success=rng.random() < 0.7,
                                     quality=rng.choice((0.1, 0.9)))
                     for i in range(rng.randint(1, 40))]
            try:
                router.record_many(batch)
            except StoreError as exc:  # a store error that says why
                assert "No space left on device" in str(exc)
                failed = batch
                break
            acknowledged.extend(r.record_id for r in batch)
        assert failed, "the disk never filled"
        # the router's projection holds only what was acknowledged
        assert sum(p.executions_total for p in router.profiles()) == len(acknowledged)
    finally:
        with contextlib.suppress(StoreError):  # it cannot sync its log on a full disk
            router.close()
    filler.unlink()
    return url, acknowledged, failed


def test_a_full_disk_fails_the_write_clearly_and_a_retry_after_freeing_space_completes(
        small_disk: Path) -> None:
    url, acknowledged, failed = fill_disk(small_disk)
    with AgentRouter(agents=AGENTS, store=url, seed=0) as router:
        stored = {r["record_id"] for r in assert_projections_equal_the_log(router)}
        assert set(acknowledged) <= stored
        assert stored - set(acknowledged) <= {r.record_id for r in failed}
        router.record_many(failed)  # the retry (rows of the failed batch that were kept
        # are skipped as duplicates)
    with AgentRouter(agents=AGENTS, store=url, seed=0) as router:
        stored = {r["record_id"] for r in assert_projections_equal_the_log(router)}
    assert stored == set(acknowledged) | {r.record_id for r in failed}


@pytest.mark.xfail(strict=True, reason="the embedded store (surrealkv) repairs the log cut "
                   "by the full disk by keeping the first rows of the failed INSERT: a batch "
                   "is not all or nothing")
def test_a_batch_that_failed_on_a_full_disk_wrote_nothing(small_disk: Path) -> None:
    url, _, failed = fill_disk(small_disk)
    with AgentRouter(agents=AGENTS, store=url, seed=0) as router:
        assert router.store.executions.stored_ids([r.record_id for r in failed]) == set()

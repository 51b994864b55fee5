"""`trustroute import` streams: a rejected file writes nothing, record_many draws a
generator one batch at a time, and a large import's memory stays bounded."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_helpers import run

from trustroute.profiles.records import ExecutionRecord, InvalidRecord
from trustroute.router import AgentRouter

#: A large import may grow peak RSS by this much over importing one row. Measured with
#: IMPORT_ROWS fat rows (2 KB of metadata each): streamed +15 MB, holding the whole file as
#: records (as imports used to) +70 MB. Every row repeats one record_id, so the store keeps
#: one execution and its own footprint (surrealkv indexes every key in memory) stays out
#: of the figure: what is measured is what the import itself holds.
IMPORT_ROWS = 20_000
GROWTH_LIMIT_MB = 35

MEASURE = """
import resource, sys
from trustroute.router.cli.app import main
code = main(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, file=sys.stderr)
raise SystemExit(code)
"""


def row(i: int, **extra: object) -> dict[str, object]:
    return {"agent_id": f"a{i % 3}", "task_type": "t", "success": i % 4 != 0,
            "record_id": f"r-{i}", **extra}


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def count(kv_url: str) -> int:
    with AgentRouter(store=kv_url) as r:
        return r.store.executions.count()


@pytest.mark.parametrize(("last", "problem"), [
    (row(99, record_id="r-\x00-99"), "record_id must not contain a NUL character"),
    (row(99, metadata={"run": {"n": 2**64}}), "does not fit in 64 bits"),
    (row(99, metadata={"note": "\ud800"}), "metadata.note: holds a lone surrogate"),
])
def test_a_bad_last_line_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        kv_url: str, last: dict[str, object],
                                        problem: str) -> None:
    before = run(capsys, "import", str(write_jsonl(tmp_path / "old.jsonl",
                                                   [row(i) for i in range(1000, 1010)])),
                 "--store", kv_url)
    assert before.code == 0, before.err
    path = write_jsonl(tmp_path / "log.jsonl", [row(i) for i in range(99)] + [last])
    result = run(capsys, "import", str(path), "--store", kv_url, "--batch-size", "10")
    assert result.code != 0
    line = result.error_line
    assert line.startswith(f"{path}: line 100: ") and problem in line, line
    assert count(kv_url) == 10


def test_an_unlisted_agent_late_in_the_file_writes_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, kv_url: str) -> None:
    config = tmp_path / "router.yaml"
    config.write_text("agents: [a0, a1, a2]\nunknown_agents: error\n", encoding="utf-8")
    path = write_jsonl(tmp_path / "log.jsonl",
                       [row(i) for i in range(25)] + [row(25, agent_id="zed")])
    result = run(capsys, "import", str(path), "--store", kv_url, "--config", str(config),
                 "--batch-size", "10")
    assert result.code == 2
    assert result.error_line.startswith(f"{path}: line 26: agent_id: unknown agent 'zed'")
    assert count(kv_url) == 0


def test_record_many_names_the_refused_item_and_writes_nothing(router: AgentRouter) -> None:
    ahead = datetime.now(UTC) + timedelta(days=2)
    records = [ExecutionRecord(agent_id="a", task_type="t", success=True, record_id=f"m-{i}",
                               timestamp=ahead if i == 7 else datetime.now(UTC))
               for i in range(9)]
    with pytest.raises(InvalidRecord, match=r"^item 7 \(record_id 'm-7'\): timestamp: "):
        router.record_many(records, batch_size=2)
    assert router.store.executions.count() == 0


def test_metadata_with_a_lone_surrogate_is_refused_before_any_write(
        router: AgentRouter) -> None:
    with pytest.raises(ValueError, match=r"metadata\.k: holds a lone surrogate"):
        ExecutionRecord(agent_id="a", task_type="t", success=True, metadata={"k": "\udfff"})
    with pytest.raises(InvalidRecord, match=r"metadata\.x\.\['\\udc00'\]|key '\\udc00'"):
        router.record(agent_id="a", task_type="t", success=True,
                      metadata={"x": {"\udc00": 1}})
    assert router.store.executions.count() == 0


def test_record_many_draws_a_generator_one_batch_at_a_time(router: AgentRouter) -> None:
    stored_when_drawn: list[tuple[int, int]] = []

    def records() -> Iterator[ExecutionRecord]:
        for i in range(25):
            stored_when_drawn.append((i, router.store.executions.count()))
            yield ExecutionRecord(agent_id="a", task_type="t", success=True,
                                  record_id=f"g-{i}")

    assert router.record_many(records(), batch_size=10) == 25
    # record i is drawn only once every batch before its own has been written
    assert stored_when_drawn == [(i, i // 10 * 10) for i in range(25)]
    assert router.profile("a", "t").executions_total == 25
    assert router.record_many(iter([]), batch_size=10) == 0


def test_arecord_many_takes_a_generator(router: AgentRouter) -> None:
    records = (ExecutionRecord(agent_id="b", task_type="t", success=i % 2 == 0,
                               record_id=f"h-{i}") for i in range(7))
    assert asyncio.run(router.arecord_many(records, batch_size=3)) == 7
    assert router.profile("b", "t").executions_total == 7


def peak_rss_of_import(path: Path, store: str) -> int:
    """Peak RSS in MB of ``trustroute import PATH`` in a fresh process."""
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, "import", str(path), "--store", store, "--json",
         "--batch-size", "2000"],
        capture_output=True, text=True, timeout=60, cwd=path.parent)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"] == sum(1 for _ in path.open(encoding="utf-8"))
    return int(result.stderr.strip().splitlines()[-1])


def test_a_large_import_stays_within_a_memory_bound(tmp_path: Path) -> None:
    rows = [json.dumps(row(i, record_id="same", metadata={"run": i, "note": "x" * 2000}))
            + "\n" for i in range(IMPORT_ROWS)]
    big, one = tmp_path / "big.jsonl", tmp_path / "one.jsonl"
    big.write_text("".join(rows), encoding="utf-8")
    one.write_text(rows[0], encoding="utf-8")
    del rows
    baseline = peak_rss_of_import(one, f"surrealkv://{tmp_path / 'one'}")
    peak = peak_rss_of_import(big, f"surrealkv://{tmp_path / 'big'}")
    assert peak - baseline < GROWTH_LIMIT_MB, (
        f"importing {IMPORT_ROWS} rows peaked at {peak} MB, one row at {baseline} MB")

"""Input that cannot hurt (issue 19, items 5, 6, 10): timestamps from the future,
control and bidi-control characters in identifiers, and oversized metadata are refused
by ``record``, ``record_many`` and ``trustroute import`` (a real CLI process) with an
error naming the field, and nothing is stored."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from trustroute import AgentRouter, ExecutionRecord
from trustroute.profiles import ProfileSettings
from trustroute.profiles.records import metadata_bytes, utc_now

TRUSTROUTE = str(Path(sys.executable).parent / "trustroute")
KIB = 1024


def one_line(error: BaseException) -> str:
    """The message of ``error``, which must be one line (pydantic's: its own line)."""
    if isinstance(error, ValidationError):
        (problem,) = error.errors()
        message = str(problem["msg"]).removeprefix("Value error, ")
    else:
        message = str(error)
    assert "\n" not in message, message
    return message


# -- timestamps from the future (item 5) ---------------------------------------------

@pytest.mark.parametrize("ahead", [timedelta(minutes=6), timedelta(days=3),
                                   datetime(9999, 1, 1, tzinfo=UTC) - utc_now()])
def test_a_record_stamped_in_the_future_is_refused(router: AgentRouter,
                                                    ahead: timedelta) -> None:
    with pytest.raises(ValueError) as info:
        router.record(agent_id="a", task_type="code", success=True,
                      timestamp=utc_now() + ahead)
    message = one_line(info.value)
    assert message.startswith("timestamp: ")
    assert "ahead of now; at most 300 s is accepted (profiles.max_clock_skew_s)" in message
    assert router.store.executions.count() == 0
    assert router.profile("a", "code").executions_total == 0


def test_a_clock_a_little_ahead_is_tolerated_and_the_past_is_fine(router: AgentRouter) -> None:
    router.record(agent_id="a", task_type="code", success=True,
                  timestamp=utc_now() + timedelta(minutes=4))
    router.record(agent_id="a", task_type="code", success=True,
                  timestamp=datetime(2001, 1, 1, tzinfo=UTC))
    assert router.store.executions.count() == 2


def test_the_tolerance_is_a_profiles_setting() -> None:
    strict = ProfileSettings(max_clock_skew_s=0)
    with AgentRouter(["a"], store="mem://", settings=strict) as router:
        with pytest.raises(ValueError, match=r"at most 0 s is accepted"):
            router.record(agent_id="a", task_type="t", success=True,
                          timestamp=utc_now() + timedelta(seconds=5))
        router.record(agent_id="a", task_type="t", success=True)  # now is never ahead
        assert router.store.executions.count() == 1
    with pytest.raises(ValidationError, match="max_clock_skew_s"):
        ProfileSettings(max_clock_skew_s=-1)


def rows(n: int, **last: Any) -> list[ExecutionRecord]:
    """``n`` good records; the last one has ``last`` fields."""
    good = [ExecutionRecord(agent_id="a", task_type="t", success=True) for _ in range(n - 1)]
    fields: dict[str, Any] = {"agent_id": "a", "task_type": "t", "success": True, **last}
    return [*good, ExecutionRecord(**fields)]


@pytest.mark.parametrize(("bad", "field"), [
    ({"timestamp": utc_now() + timedelta(days=1)}, "timestamp"),
    ({"metadata": {"blob": "x" * (64 * KIB)}}, "metadata"),
])
def test_record_many_with_one_bad_record_stores_nothing(router: AgentRouter,
                                                        bad: dict[str, Any], field: str) -> None:
    batch = rows(25, **bad)  # the bad one is in the last of three batches
    named = f"^item 24 \\(record_id '{batch[24].record_id}'\\): {field}: "
    with pytest.raises(ValueError, match=named):
        router.record_many(batch, batch_size=10)
    assert router.store.executions.count() == 0
    with pytest.raises(ValueError, match=named):  # async twin: the same rule
        asyncio.run(router.arecord_many(tuple(batch), batch_size=10))
    assert router.store.executions.count() == 0


# -- control and bidi-control characters in identifiers (item 6) ----------------------

HOSTILE = {
    "ESC clear screen": ("\x1b[2J\x1b[H", "U+001B", "control"),
    "C1 CSI": ("a\x9b31m", "U+009B", "control"),
    "newline": ("code\nreview", "U+000A", "control"),
    "right-to-left override": ("code\u202etxt.exe", "U+202E", "bidi-control"),
    "left-to-right isolate": ("\u2066code", "U+2066", "bidi-control"),
    "right-to-left mark": ("code\u200f", "U+200F", "bidi-control"),
    "line separator": ("a\u2028b", "U+2028", "control"),
}


@pytest.mark.parametrize("field", ["agent_id", "task_type", "record_id", "decision_id"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_record_refuses_control_characters_in_identifiers(router: AgentRouter, field: str,
                                                          name: str) -> None:
    value, code, kind = HOSTILE[name]
    fields: dict[str, Any] = {"agent_id": "a", "task_type": "code", "success": True,
                              field: value}
    with pytest.raises(ValueError) as info:  # InvalidRecord, or pydantic's for the model
        if field == "decision_id":  # record() takes it through a decision or a record
            router.record(ExecutionRecord(**fields))
        router.record(**fields)
    message = one_line(info.value)
    assert f"{field} must not contain {kind} characters ({code} at" in message
    assert router.store.executions.count() == 0


@pytest.mark.parametrize("call", [
    lambda r: r.select("code\u202e"),
    lambda r: r.review("a", "\x1bc", approved=True),
    lambda r: r.signal("a", "code\u2067", "praised"),
    lambda r: r.feedback("d\x07", approved=True),
    lambda r: AgentRouter(["ok", "a\x1b[31m"], store="mem://"),
], ids=["select", "review", "signal", "feedback", "agent list"])
def test_every_entry_point_refuses_them(router: AgentRouter,
                                        call: Callable[[AgentRouter], Any]) -> None:
    with pytest.raises(ValueError, match=r"must not contain (bidi-)?control characters"):
        call(router)
    assert router.store.executions.count() == 0


def test_printable_unicode_is_still_an_identifier(router: AgentRouter) -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # joined by zero-width joiners
    for value in ("名前", "ünïcødé", family, "a\u00a0b", "code review"):
        router.record(agent_id="a", task_type=value, success=True)
    assert router.store.executions.count() == 5


# -- metadata size (item 10) ------------------------------------------------------------

def test_metadata_over_the_limit_is_refused_and_at_it_accepted(router: AgentRouter) -> None:
    room = 64 * KIB - metadata_bytes({"blob": ""})
    blob = "é" * (room // 2) + "x" * (room % 2)  # "é" is two bytes in UTF-8
    assert metadata_bytes({"blob": blob}) == 64 * KIB
    router.record(agent_id="a", task_type="t", success=True, metadata={"blob": blob})
    over = {"blob": blob + "x"}
    with pytest.raises(ValueError) as info:
        router.record(agent_id="a", task_type="t", success=True, metadata=over)
    assert one_line(info.value) == ("metadata: 65,537 bytes once encoded as JSON; the limit "
                                    "is 65,536 (profiles.max_metadata_bytes)")
    assert router.store.executions.count() == 1


def test_the_metadata_limit_is_a_profiles_setting() -> None:
    with AgentRouter(["a"], store="mem://",
                     settings=ProfileSettings(max_metadata_bytes=100)) as router:
        with pytest.raises(ValueError, match=r"the limit is 100 \(profiles"):
            router.record(agent_id="a", task_type="t", success=True,
                          metadata={"note": "x" * 100})
        router.record(agent_id="a", task_type="t", success=True, metadata={"note": "short"})
        assert router.store.executions.count() == 1


# -- trustroute import, as a process ----------------------------------------------------

def import_file(tmp_path: Path, lines: list[dict[str, Any]], *config: str
                ) -> subprocess.CompletedProcess[str]:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return subprocess.run([TRUSTROUTE, "import", str(log), *config],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def stored(kv_url: str) -> int:
    with AgentRouter(store=kv_url) as router:
        return router.store.executions.count()


GOOD = {"agent_id": "a", "task_type": "code", "success": True,
        "timestamp": "2025-01-01T00:00:00Z"}


@pytest.mark.parametrize(("bad", "expected"), [
    ({"timestamp": "9999-01-01T00:00:00Z"},
     "line 3: timestamp: 9999-01-01T00:00:00Z is"),
    ({"timestamp": (utc_now() + timedelta(hours=1)).timestamp()}, "line 3: timestamp: "),
    ({"agent_id": "\x1b]0;pwned\x07"},
     "line 3: agent_id: agent_id must not contain control characters (U+001B at position 0)"),
    ({"task_type": "billing\u202e"},
     "line 3: task_type: task_type must not contain bidi-control characters (U+202E"),
    ({"metadata": {"blob": "x" * (64 * KIB)}},
     "line 3: metadata: 65,547 bytes once encoded as JSON; the limit is 65,536 "
     "(profiles.max_metadata_bytes)"),
], ids=["year 9999", "an hour ahead", "ESC", "bidi", "metadata"])
def test_import_refuses_the_row_naming_line_and_field_and_stores_nothing(
        tmp_path: Path, kv_url: str, bad: dict[str, Any], expected: str) -> None:
    done = import_file(tmp_path, [GOOD, GOOD, {**GOOD, **bad}], "--store", kv_url)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert expected in lines[0]
    assert stored(kv_url) == 0


def test_import_follows_the_config_files_limits(tmp_path: Path, kv_url: str) -> None:
    config = tmp_path / "router.yaml"
    config.write_text(f"store: {kv_url}\nprofiles:\n  max_clock_skew_s: 7200\n"
                      "  max_metadata_bytes: 50\n", encoding="utf-8")
    soon = (utc_now() + timedelta(hours=1)).isoformat()
    done = import_file(tmp_path, [{**GOOD, "timestamp": soon}], "--config", str(config))
    assert done.returncode == 0, done.stderr
    done = import_file(tmp_path, [{**GOOD, "metadata": {"note": "x" * 50}}],
                       "--config", str(config))
    assert done.returncode == 2
    assert "line 1: metadata: 61 bytes once encoded as JSON; the limit is 50" in done.stderr
    assert stored(kv_url) == 1

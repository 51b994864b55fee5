"""ExecutionRecord: bad input is rejected with an error naming the field; defaults hold."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from trustroute.profiles import ExecutionRecord
from trustroute.profiles.records import InvalidRecord
from trustroute.router import AgentRouter


def make(**fields: object) -> ExecutionRecord:
    base: dict[str, object] = {"agent_id": "a", "task_type": "code", "success": True}
    base.update(fields)
    return ExecutionRecord(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("quality", math.nan, "finite"),
        ("quality", math.inf, "finite"),
        ("quality", -0.01, ">= 0"),
        ("quality", 1.5, "<= 1"),
        ("latency_ms", math.nan, "finite"),
        ("latency_ms", -math.inf, "finite"),
        ("latency_ms", -1.0, ">= 0"),
        ("cost", math.inf, "finite"),
        ("cost", -0.5, ">= 0"),
        ("agent_id", "", "must not be empty"),
        ("task_type", "", "must not be empty"),
        ("record_id", "", "must not be empty"),
        ("decision_id", "", "must not be empty"),
        ("agent_id", "x" * 257, "limit is 256"),
        ("task_type", "x" * 257, "limit is 256"),
        ("record_id", "x" * 257, "limit is 256"),
        ("decision_id", "x" * 257, "limit is 256"),
        ("timestamp", datetime(2025, 1, 1, 12, 0), "timezone-aware"),
        ("quality", True, "must be a number"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(field: str, value: object,
                                                  fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        make(**{field: value})
    message = str(info.value)
    assert field in message
    assert fragment in message


def test_quality_defaults_from_success() -> None:
    assert make(success=True).quality == 1.0
    assert make(success=False).quality == 0.0
    assert make(success=False, quality=0.3).quality == 0.3
    assert make(success=True).effective_quality == 1.0


def test_ids_at_the_limit_and_odd_characters_are_kept_verbatim() -> None:
    hostile = "'; DELETE execution; --\"ü🙂" + "x" * 230
    assert len(hostile) <= 256
    rec = make(agent_id="a" * 256, task_type=hostile, record_id="r" * 256)
    assert rec.agent_id == "a" * 256
    assert rec.task_type == hostile
    assert rec.record_id == "r" * 256


def test_timestamps_are_normalised_to_utc() -> None:
    paris = timezone(timedelta(hours=1))
    rec = make(timestamp=datetime(2025, 1, 1, 13, 0, tzinfo=paris))
    assert rec.timestamp == datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    assert rec.timestamp.utcoffset() == timedelta(0)


def test_record_ids_are_fresh_uuids_and_unknown_fields_are_rejected() -> None:
    assert make().record_id != make().record_id
    with pytest.raises(ValidationError, match="colour"):
        make(colour="red")


def test_metadata_is_what_the_store_gives_back(kv_url: str) -> None:
    """The store drops a key whose value is null and reads a naive datetime as UTC: the
    record says so when built (keys dropped, naive datetimes refused), not after."""
    given = {"gone": None, "kept": [None, {"gone": None, "x": 1}], "deep": {"gone": None},
             "at": datetime(2025, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))}
    with AgentRouter(agents=["a"], store=kv_url) as router:
        rec = router.record(agent_id="a", task_type="t", success=True, metadata=given)
        with pytest.raises(InvalidRecord, match=r"metadata\.at: a datetime without a "
                                                r"timezone is ambiguous"):
            router.record(agent_id="a", task_type="t", success=True,
                          metadata={"at": datetime(2025, 1, 1)})
    assert rec.metadata == {"kept": [None, {"x": 1}], "deep": {},
                            "at": datetime(2025, 1, 1, tzinfo=UTC)}
    with AgentRouter(agents=["a"], store=kv_url) as router:
        (row,) = router.store.executions.iter_executions()
    assert row["metadata"] == rec.metadata

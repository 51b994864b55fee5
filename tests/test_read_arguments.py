"""The read side of the Python API checks its arguments like the write side: a one-line
error naming the argument, never a pydantic dump, an AttributeError or a silent result."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from trustroute import AgentRouter


@pytest.mark.parametrize(("call", "said"), [
    (lambda r, _: r.profile(None, "code"), "agent_id must be a string, got NoneType"),
    (lambda r, _: r.profile("a", 5), "task_type must be a string, got int"),
    (lambda r, _: r.trust(None, None), "agent_id must be a string, got NoneType"),
    (lambda r, _: r.trust("a", " code"), "task_type must not start or end with white space"),
    (lambda r, _: r.profiles(5), "task_type must be a string, got int"),
    (lambda r, _: r.profiles(""), "task_type must not be empty"),
    (lambda r, out: r.report(out, since="2020-01-01"),
     "since must be a timezone-aware datetime or None, got '2020-01-01'"),
    (lambda r, out: r.report(out, since=datetime(2020, 1, 1)),
     "since must be a timezone-aware datetime or None"),
    (lambda r, out: r.report(out, task_type=5), "task_type must be a string, got int"),
])
def test_read_calls_name_a_bad_argument(tmp_path: Path, call: Callable[[AgentRouter, Path], Any],
                                        said: str) -> None:
    out = tmp_path / "report.html"
    with AgentRouter(["a"], store=f"surrealkv://{tmp_path / 'db'}") as router:
        router.record(agent_id="a", task_type="code", success=True)
        with pytest.raises((TypeError, ValueError)) as info:
            call(router, out)
        assert said in str(info.value)
        assert "\n" not in str(info.value)
        assert [p.agent_id for p in router.profiles()] == ["a"]  # good calls still work
    assert not out.exists()

"""Errors raised in a worker process reach the parent as they were raised: pickled by
concurrent.futures, with the same message and attributes (pickle's default would call
``__init__`` again with the message alone, garbling it or failing)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableLambda

from trustroute import AgentRouter, NoAgentAvailable
from trustroute.integrations.langchain import AllAgentsFailed, RoutedRunnable
from trustroute.profiles.store import DuplicateRecord
from trustroute.router.errors import AgentAtCapacity, UnknownAgent, UnknownDecision
from trustroute.router.row_files import RowFileError, jsonl_rows


def raise_in_worker(case: str, tmp: str) -> None:
    """Runs in the worker: trigger one of the router's errors through its public API."""
    with AgentRouter(agents=[{"id": "a", "max_concurrent": 1}, "b"], store="mem://",
                     unknown_agents="error") as r:
        if case == "no_agent":
            r.select("code", exclude=["a", "b"])
        elif case == "unknown_agent":
            r.record(agent_id="zzz", task_type="code", success=True)
        elif case == "unknown_decision":
            r.feedback("no-such-decision", approved=True)
        elif case == "duplicate":
            r.record(agent_id="a", task_type="code", success=True, record_id="r-1")
            r.record(agent_id="a", task_type="code", success=True, record_id="r-1")
        elif case == "capacity":
            r.slots.acquire("a", 1)
            r.slots.acquire("a", 1)
        elif case == "all_failed":
            def fail(_: object) -> str:
                raise RuntimeError("agent down")
            routed = RoutedRunnable(router=r, agents={"a": RunnableLambda(fail),
                                                      "b": RunnableLambda(fail)},
                                    task_type=lambda _: "code")
            routed.invoke("x")
        elif case == "row_file":
            path = Path(tmp) / "rows.jsonl"
            path.write_text("[1, 2]\n", encoding="utf-8")
            list(jsonl_rows(path))


def in_worker(case: str, tmp: Path) -> BaseException:
    context = multiprocessing.get_context("spawn")  # nothing shared: only the pickle
    with (ProcessPoolExecutor(1, mp_context=context) as pool,
          pytest.raises(BaseException) as info):
        # a budget, not a timing: a spawned worker imports trustroute and LangChain
        # first, which took a machine at load 9 on 2 cores over 60 s
        pool.submit(raise_in_worker, case, str(tmp)).result(timeout=600)
    return info.value


@pytest.mark.parametrize(("case", "kind", "text"), [
    ("no_agent", NoAgentAvailable, "no agent available for task type 'code': "),
    ("unknown_agent", UnknownAgent, "unknown agent 'zzz'"),
    ("unknown_decision", UnknownDecision, "unknown ref 'no-such-decision': no decision"),
    ("duplicate", DuplicateRecord, "record_id 'r-1' is already stored"),
    ("capacity", AgentAtCapacity, "agent 'a' is at capacity (1 tasks in flight)"),
    ("row_file", RowFileError, "rows.jsonl:1: "),
])
def test_a_router_error_crosses_a_process_boundary_unchanged(
        case: str, kind: type[BaseException], text: str, tmp_path: Path) -> None:
    error = in_worker(case, tmp_path)
    assert type(error) is kind
    assert text in str(error) and str(error).count("no agent available") <= 1
    assert "\n" not in str(error)


def test_attributes_survive(tmp_path: Path) -> None:
    assert in_worker("no_agent", tmp_path).task_type == "code"  # type: ignore[attr-defined]
    assert in_worker("duplicate", tmp_path).record_id == "r-1"  # type: ignore[attr-defined]
    row_error = in_worker("row_file", tmp_path)
    assert isinstance(row_error, RowFileError) and row_error.line == 1


def test_the_all_agents_failed_summary_crosses_with_the_first_error(tmp_path: Path) -> None:
    error = in_worker("all_failed", tmp_path)
    assert isinstance(error, RuntimeError) and str(error) == "agent down"
    summary = AllAgentsFailed.of(error)
    assert summary is not None and summary.task_type == "code"
    assert sorted(summary.errors) == ["a", "b"]
    assert next(iter(summary.errors.values())) is error  # the first tried: one object

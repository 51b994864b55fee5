"""Agent errors are visible (issue 19, item 12): each failure of a routed agent is logged
(agent, task type, exception type and message) at WARNING, rate-limited per kind, with
its traceback at DEBUG; ``exceptions_to_handle`` and ``exception_key`` behave as in
LangChain's ``with_fallbacks``: other exceptions reach the caller at once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import ConfigurableField, RunnableGenerator, RunnableLambda
from langchain_helpers import chat, executions, prefer, word_stream

from trustroute.integrations.langchain import RoutedRunnable
from trustroute.router import AgentRouter

LOGGER = "trustroute.integrations.langchain.failures"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def debugs_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.DEBUG]


def test_a_prompt_missing_a_variable_is_logged_naming_agent_task_type_and_error(
        router: AgentRouter, caplog: pytest.LogCaptureFixture) -> None:
    prefer(router, "a", "qa")
    broken = ChatPromptTemplate.from_messages([("human", "{question} {context}")]) | chat("x")
    fine = ChatPromptTemplate.from_messages([("human", "{question}")]) | chat("fine")
    routed = RoutedRunnable(router=router, agents={"a": broken, "b": fine}, task_type="kind")
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        answer = routed.invoke({"kind": "qa", "question": "why?"})
    assert answer.content == "fine"
    (warning,) = warnings_of(caplog)
    message = warning.getMessage()
    assert message.startswith("agent 'a' failed on task type 'qa': KeyError: ")
    assert "missing variables {'context'}" in message
    assert message.endswith("(recorded; falling back to another agent)")
    assert "\n" not in message
    assert (warning.agent_id, warning.task_type, warning.error_type) == (  # type: ignore[attr-defined]
        "a", "qa", "KeyError")
    (debug,) = debugs_of(caplog)
    assert debug.exc_info is not None and debug.exc_info[0] is KeyError
    assert "Traceback" in caplog.text


def always(error: type[Exception], calls: list[str], name: str) -> RunnableLambda:
    def fail(x: Any) -> Any:
        calls.append(name)
        raise error(f"{name} is broken")
    return RunnableLambda(fail)


def test_the_copies_made_for_configurable_fields_share_the_rate_limit(
        router: AgentRouter, caplog: pytest.LogCaptureFixture) -> None:
    """LangChain builds a new RoutedRunnable per call that configures a field; each had
    a log of its own, so every failure was a WARNING (10 instead of 2 here)."""
    calls: list[str] = []
    routed = RoutedRunnable(router=router, task_type=lambda _: "t",
                            agents={"a": always(ValueError, calls, "a"),
                                    "b": always(ValueError, calls, "b")})
    configurable = routed.configurable_fields(max_attempts=ConfigurableField(id="tries"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(5):
            with pytest.raises(ValueError):
                configurable.invoke("x", {"configurable": {"tries": 2}})
    assert len(calls) == 10
    assert len(warnings_of(caplog)) == 2  # one per kind: (a, t, ValueError), (b, ...)


def test_warnings_are_rate_limited_per_kind_and_count_what_was_held_back(
        router: AgentRouter, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    routed = RoutedRunnable(router=router, task_type=lambda _: "t",
                            agents={"a": always(ValueError, calls, "a"),
                                    "b": always(ValueError, calls, "b")},
                            failure_log_interval_s=0.5)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        for _ in range(10):
            with pytest.raises(ValueError):
                routed.invoke("x")
        assert len(calls) == 20
        first = [r.getMessage() for r in warnings_of(caplog)]
        assert sorted(m.split(":")[0] for m in first) == [
            "agent 'a' failed on task type 't'", "agent 'b' failed on task type 't'"]
        assert len(debugs_of(caplog)) == 20  # every traceback, at DEBUG
        time.sleep(0.6)
        with pytest.raises(ValueError):
            routed.invoke("x")
    later = [r.getMessage() for r in warnings_of(caplog)][2:]
    assert len(later) == 2
    assert all(m.endswith("; 9 more like it since the last warning)") for m in later)
    assert any("recorded; no further attempt" in m for m in later)


def test_an_async_failure_is_logged_too(router: AgentRouter,
                                        caplog: pytest.LogCaptureFixture) -> None:
    prefer(router, "a", "t")
    calls: list[str] = []
    routed = RoutedRunnable(router=router, task_type=lambda _: "t",
                            agents={"a": always(TimeoutError, calls, "a"),
                                    "b": RunnableLambda(lambda x: "ok")})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert asyncio.run(routed.ainvoke("x")) == "ok"
    (warning,) = warnings_of(caplog)
    assert "agent 'a' failed on task type 't': TimeoutError: a is broken" in warning.getMessage()


def test_a_mid_stream_failure_says_it_reached_the_caller(
        router: AgentRouter, caplog: pytest.LogCaptureFixture) -> None:
    prefer(router, "a", "s")

    def half(inputs: Iterator[Any]) -> Iterator[str]:
        for _ in inputs:
            pass
        yield "partial "
        raise ConnectionError("reset\x1b[2J by peer")

    routed = RoutedRunnable(router=router, task_type=lambda _: "s",
                            agents={"a": RunnableGenerator(half), "b": word_stream("b")})
    with caplog.at_level(logging.WARNING, logger=LOGGER), \
            pytest.raises(ConnectionError):
        list(routed.stream("x"))
    (warning,) = warnings_of(caplog)
    message = warning.getMessage()
    assert "ConnectionError: reset\\x1b[2J by peer" in message  # escaped, never raw ESC
    assert message.endswith("(recorded; its chunks already reached the caller, so it is raised)")


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream"])
def test_other_exceptions_are_raised_at_once_unrecorded_and_logged_at_debug_only(
        router: AgentRouter, caplog: pytest.LogCaptureFixture, mode: str) -> None:
    prefer(router, "a", "t")
    before = router.store.executions.count()
    calls: list[str] = []
    routed = RoutedRunnable(router=router, task_type=lambda _: "t",
                            agents={"a": always(KeyError, calls, "a"),
                                    "b": always(KeyError, calls, "b")},
                            exceptions_to_handle=(TimeoutError, ConnectionError))
    with caplog.at_level(logging.DEBUG, logger=LOGGER), pytest.raises(KeyError, match="a is"):
        if mode == "invoke":
            routed.invoke("x")
        elif mode == "ainvoke":
            asyncio.run(routed.ainvoke("x"))
        else:
            list(routed.stream("x"))
    assert calls == ["a"]  # no fallback
    assert router.store.executions.count() == before
    assert router.in_flight("a") == 0
    assert warnings_of(caplog) == []
    (debug,) = debugs_of(caplog)
    assert "not in exceptions_to_handle: raised to the caller, not recorded" in \
        debug.getMessage()


def test_handled_exceptions_fall_back_and_are_recorded(router: AgentRouter) -> None:
    prefer(router, "a", "t")
    before = router.store.executions.count()
    calls: list[str] = []
    routed = RoutedRunnable(router=router, task_type=lambda _: "t",
                            agents={"a": always(TimeoutError, calls, "a"),
                                    "b": RunnableLambda(lambda x: "ok")},
                            exceptions_to_handle=(TimeoutError,))
    assert routed.invoke("x") == "ok"
    rows = executions(router)[before:]
    assert [(r["agent_id"], r["success"]) for r in rows] == [("a", False), ("b", True)]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream"])
def test_exception_key_passes_the_last_error_to_the_next_agent(router: AgentRouter,
                                                               mode: str) -> None:
    prefer(router, "a", "t")
    calls: list[str] = []
    seen: list[dict[str, Any]] = []

    def answer(x: dict[str, Any]) -> str:
        seen.append(x)
        return f"recovered from {type(x['error']).__name__}"

    routed = RoutedRunnable(router=router, task_type="kind",
                            agents={"a": always(TimeoutError, calls, "a"),
                                    "b": RunnableLambda(answer)},
                            exception_key="error")
    given = {"kind": "t", "q": "?"}
    if mode == "invoke":
        out = routed.invoke(given)
    elif mode == "ainvoke":
        out = asyncio.run(routed.ainvoke(given))
    else:
        out = "".join(routed.stream(given))
    assert out == "recovered from TimeoutError"
    assert str(seen[0]["error"]) == "a is broken" and seen[0]["q"] == "?"
    assert given == {"kind": "t", "q": "?"}  # the caller's dict is not modified


def test_exception_key_needs_a_dict_input(router: AgentRouter) -> None:
    routed = RoutedRunnable(router=router, task_type=lambda _: "t", exception_key="error",
                            agents={"a": RunnableLambda(str), "b": RunnableLambda(str)})
    with pytest.raises(ValueError, match=r"exception_key='error' .* must be a dict, got str"):
        routed.invoke("x")
    assert router.store.executions.count() == 0

"""TransferDispatcher: sync and async hooks, retries, pending storage, retry of pending."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.handoff.transfer import (
    CallableHook,
    LoggingHook,
    TransferDispatcher,
    TransferHook,
    TransferRequest,
)


def make_request(**fields: Any) -> TransferRequest:
    return TransferRequest(input="my card never arrived", reason="no retrieval", **fields)


class Flaky:
    """Fails ``failures`` times, then returns ``answer``."""

    def __init__(self, failures: int, answer: Any = "ok") -> None:
        self.failures = failures
        self.calls = 0
        self.answer = answer
        self.name = "flaky"

    def __call__(self, request: TransferRequest) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"helpdesk down (call {self.calls})")
        return self.answer


class Pause(Exception):
    """Stands in for a framework's control-flow exception."""


class Pausing:
    name = "pausing"
    passthrough = (Pause,)
    runs_last = True

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: TransferRequest) -> None:
        self.calls += 1
        raise Pause()


def test_hooks_satisfy_the_protocol() -> None:
    assert isinstance(LoggingHook(), TransferHook)
    assert isinstance(CallableHook(print), TransferHook)
    assert isinstance(lambda request: None, TransferHook)


def test_sync_and_async_hooks_receive_the_request() -> None:
    seen: list[tuple[str, str]] = []

    def sync_hook(request: TransferRequest) -> str:
        seen.append(("sync", request.request_id))
        return "ticket-1"

    async def async_hook(request: TransferRequest) -> str:
        await asyncio.sleep(0)
        seen.append(("async", request.request_id))
        return "ticket-2"

    dispatcher = TransferDispatcher([sync_hook, CallableHook(async_hook)], delivery="sync")
    req = make_request()
    outcome = dispatcher.dispatch(req)
    assert outcome.delivered and not outcome.pending
    assert seen == [("sync", req.request_id), ("async", req.request_id)]
    assert outcome.responses == {"sync_hook": "ticket-1", "async_hook": "ticket-2"}

    seen.clear()
    outcome = asyncio.run(dispatcher.adispatch(req))
    assert outcome.delivered and [s[0] for s in seen] == ["sync", "async"]


def test_async_hook_from_sync_dispatch_inside_a_running_loop() -> None:
    calls: list[str] = []

    async def async_hook(request: TransferRequest) -> None:
        calls.append(request.reason)

    async def main() -> bool:
        # a sync dispatch called from async code must not deadlock the running loop
        return TransferDispatcher([async_hook], delivery="sync").dispatch(make_request()).delivered

    assert asyncio.run(main())
    assert calls == ["no retrieval"]


def test_adispatch_runs_sync_hooks_off_the_event_loop() -> None:
    threads: list[str] = []

    def sync_hook(request: TransferRequest) -> None:
        threads.append(threading.current_thread().name)

    async def main() -> None:
        await TransferDispatcher([sync_hook], delivery="sync").adispatch(make_request())

    asyncio.run(main())
    assert threads and threads[0] != threading.main_thread().name


def test_flaky_hook_is_retried() -> None:
    flaky = Flaky(failures=2)
    outcome = TransferDispatcher([flaky], attempts=3, backoff_s=0,
                                 delivery="sync").dispatch(make_request())
    assert outcome.delivered and flaky.calls == 3
    assert outcome.deliveries[0].attempts == 3


def test_async_flaky_hook_is_retried() -> None:
    calls = 0

    async def hook(request: TransferRequest) -> None:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TimeoutError("slow")

    outcome = asyncio.run(TransferDispatcher([hook], backoff_s=0,
                                             delivery="sync").adispatch(make_request()))
    assert outcome.delivered and calls == 3


def test_failing_hook_is_stored_pending_and_others_still_deliver(
    caplog: pytest.LogCaptureFixture,
) -> None:
    delivered: list[str] = []
    broken = Flaky(failures=99)
    with Store("mem://") as store:
        dispatcher = TransferDispatcher(
            [broken, lambda r: delivered.append(r.request_id)], store=store, backoff_s=0,
                  delivery="sync"
        )
        req = make_request(task_type="cards", run_id="run-7")
        outcome = dispatcher.dispatch(req)
        rows = store.repository(HandoffRepository).pending()
    assert broken.calls == 3 and delivered == [req.request_id]
    assert outcome.pending and outcome.stored and not outcome.delivered
    assert len(rows) == 1
    row = rows[0]
    assert row["hook"] == "flaky" and row["attempts"] == 3 and row["task_type"] == "cards"
    assert row["error"] == "ConnectionError: helpdesk down (call 3)"
    assert TransferRequest.model_validate(row["request"]) == req
    assert "failed after 3 attempt(s)" in caplog.text


def test_no_hooks_means_pending_not_lost() -> None:
    with Store("mem://") as store:
        outcome = TransferDispatcher(store=store, delivery="sync").dispatch(make_request())
        rows = store.repository(HandoffRepository).pending()
    assert outcome.pending and outcome.stored
    assert rows[0]["error"] == "no transfer hooks configured"


def test_without_a_store_the_request_is_kept_in_memory(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = TransferDispatcher([Flaky(99)], attempts=2, backoff_s=0, delivery="sync")
    req = make_request()
    outcome = dispatcher.dispatch(req)
    assert outcome.pending and not outcome.stored
    assert dispatcher.undelivered == [(req, "flaky")]
    assert "kept in memory only" in caplog.text


def test_every_failed_hook_is_kept_in_memory_not_just_the_first(
        caplog: pytest.LogCaptureFixture) -> None:
    second = Flaky(99)
    second.name = "pager"
    dispatcher = TransferDispatcher([Flaky(99), second], attempts=1, backoff_s=0, delivery="sync")
    req = make_request()
    outcome = dispatcher.dispatch(req)
    assert outcome.pending and not outcome.stored
    assert dispatcher.undelivered == [(req, "flaky"), (req, "pager")]
    assert caplog.text.count("kept in memory only") == 2


def test_passthrough_exception_propagates_unretried_and_unstored() -> None:
    first: list[str] = []
    pausing = Pausing()
    with Store("mem://") as store:
        dispatcher = TransferDispatcher([pausing, first.append], store=store, delivery="sync")
        with pytest.raises(Pause):
            dispatcher.dispatch(make_request())
        assert store.repository(HandoffRepository).pending() == []
    assert pausing.calls == 1
    assert len(first) == 1  # the pausing hook runs last, after the notifications


def test_keyboard_interrupt_is_not_retried() -> None:
    calls = 0

    def hook(request: TransferRequest) -> None:
        nonlocal calls
        calls += 1
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        TransferDispatcher([hook], backoff_s=0, delivery="sync").dispatch(make_request())
    assert calls == 1


def test_logging_hook_leaves_the_input_out_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    LoggingHook()(make_request(confidence=0.25))
    assert "confidence 0.25" in caplog.text and "no retrieval" in caplog.text
    assert "my card never arrived" not in caplog.text
    LoggingHook(include_input=True, level="INFO")(make_request())
    assert "my card never arrived" in caplog.text
    with pytest.raises(ValueError, match="unknown log level"):
        LoggingHook(level="LOUD")


def test_request_validation() -> None:
    with pytest.raises(ValueError, match="confidence"):
        make_request(confidence=1.5)
    with pytest.raises(ValueError, match="timezone-aware"):
        from datetime import datetime

        make_request(timestamp=datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="extra"):
        TransferRequest(reason="x", colour="blue")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"request_id must not contain '\.'"):
        make_request(request_id="ticket.42")  # the webhook-id of a dotted signature
    payload = make_request(diagnostics={"obj": object()}).payload()
    assert isinstance(payload["diagnostics"]["obj"], str)
    assert payload["timestamp"].endswith("Z") or "+00:00" in payload["timestamp"]


def test_async_paths_write_hand_offs_to_the_store_off_the_event_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    writers: list[threading.Thread] = []

    def watched(write: Any) -> Any:
        def spy(self: HandoffRepository, *args: Any, **kwargs: Any) -> Any:
            writers.append(threading.current_thread())
            return write(self, *args, **kwargs)
        return spy

    for name in ("save_pending", "mark_delivered", "mark_failed"):
        monkeypatch.setattr(HandoffRepository, name, watched(getattr(HandoffRepository, name)))

    async def on_the_loop(work: Any) -> threading.Thread:
        await work()
        return threading.current_thread()

    with Store("mem://") as store:
        dispatcher = TransferDispatcher([CallableHook(lambda r: None, name="desk"),
                                         Flaky(9)], store=store, delivery="sync", attempts=1)
        loop = asyncio.run(on_the_loop(lambda: dispatcher.adispatch(make_request())))
        assert len(writers) >= 3 and loop not in writers  # stored, delivered, failed
        writers.clear()
        loop = asyncio.run(on_the_loop(lambda: dispatcher.adeliver(make_request())))
        assert writers and loop not in writers
    writers.clear()
    with AgentRouter(agents=["a", "b"], store="mem://", transfer=TransferDispatcher(
            [CallableHook(lambda r: None, name="desk")]), abstention={
            "on_abstain": "human", "sparse_evidence": {"enabled": True}}) as router:
        loop = asyncio.run(on_the_loop(lambda: router.aselect("code")))
        router.transfer.join(10)  # type: ignore[union-attr]
    assert writers and loop not in writers  # the hand-off of the abstention

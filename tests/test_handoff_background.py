"""Hand-offs off the request path, row states that only move forward, and what
``trustroute handoffs`` shows: real HTTP receivers on 127.0.0.1, embedded SurrealDB,
LangChain objects and the real CLI entry point."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run
from handoff_helpers import faq_store
from langchain_core.runnables import RunnableLambda
from webhook_server import webhook_receiver

from trustroute.integrations.langchain.handoff import HandoffResult, HandoffRunnable
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.config import RouterConfig
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer import (
    CallableHook,
    TransferDispatcher,
    TransferRequest,
    WebhookHook,
)

CONFIDENCE = RetrievalConfidence(score_threshold=0.4)  # the toy embedder scores low
UNCOVERED = "can I buy bitcoin with crypto"
TASKS = 80


def write_config(path: Path, url: str, **handoff: Any) -> Path:
    section = "".join(f"  {k}: {v}\n" for k, v in handoff.items())
    path.write_text(
        "store: surrealkv://db\nagents: [bot]\n"
        f"hooks:\n  - type: webhook\n    url: {url}\n    timeout_s: 1\n    attempts: 2\n"
        f"    backoff_s: 0.1\nhandoff:\n{section or '  {}'}\n",
        encoding="utf-8",
    )
    return path


def hand_off(config: Path) -> tuple[float, float, list[str]]:
    """Route TASKS uncovered questions through a HandoffRunnable of the router built from
    ``config``; the seconds they took, the seconds close() took, and the request ids."""
    with AgentRouter.from_config(config) as router:
        rag = HandoffRunnable(faq_store(), RunnableLambda(lambda x: "answer"),
                              confidence=CONFIDENCE, router=router)
        started = time.monotonic()
        results = [rag.invoke(UNCOVERED) for _ in range(TASKS)]
        took = time.monotonic() - started
        closing = time.monotonic()
    closed = time.monotonic() - closing
    assert all(isinstance(r, HandoffResult) for r in results)
    return took, closed, [r.request.request_id for r in results]  # type: ignore[union-attr]


@pytest.mark.slow  # ~10 s: 80 hand-offs twice, then 80 re-deliveries
def test_a_receiver_that_is_down_does_not_slow_the_routed_tasks(tmp_path: Path) -> None:
    # every attempt waits for the 1 s timeout: synchronously 80 tasks would take > 160 s
    with webhook_receiver([3.0]) as down:
        config = write_config(tmp_path / "router.yaml", down.url, dispatch_close_timeout_s=1)
        took, closed, ids = hand_off(config)
    with webhook_receiver([200]) as up:
        up_config = write_config(tmp_path / "up.yaml", up.url)
        up_config.write_text(up_config.read_text().replace("surrealkv://db", "surrealkv://db2"))
        took_up, _, _ = hand_off(up_config)
    assert _capsys is not None
    with _capsys.disabled():
        print(f"\n{TASKS} hand-offs: receiver down {took:.2f} s, up {took_up:.2f} s")
    assert took < 5.0, took  # the callers never waited for the receiver
    assert closed < 4.0, closed  # close() is bounded (1 s), plus the store's own close
    with Store(f"surrealkv://{tmp_path / 'db'}") as store:
        rows = store.repository(HandoffRepository).pending(limit=1000)
        assert sorted(r["request_id"] for r in rows) == sorted(ids)  # nothing lost
    # the receiver is back: the next process (here the CLI) delivers every one, once
    with webhook_receiver([200]) as back:
        config.write_text(config.read_text().replace(down.url, back.url))
        retried = run_cli("handoffs", "--config", str(config), "--retry", "--json")
        assert retried == {"delivered": TASKS, "pending": 0, "unconfigured": {}, "held": 0,
                           "held_until": None}
    assert sorted(r.headers["webhook-id"] for r in back.received) == sorted(ids)


_capsys: pytest.CaptureFixture[str] | None = None


@pytest.fixture(autouse=True)
def _cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    global _capsys
    _capsys = capsys
    monkeypatch.setenv("COLUMNS", "200")


def run_cli(*argv: str) -> Any:
    assert _capsys is not None
    result = run(_capsys, *argv)
    assert result.code == 0, result.err
    return result.json() if "--json" in argv else result.out


def test_close_waits_for_quick_deliveries_and_the_next_dispatch_restarts(kv_url: str) -> None:
    got: list[str] = []
    with Store(kv_url) as store:
        dispatcher = TransferDispatcher([CallableHook(lambda r: got.append(r.request_id),
                                                      name="desk")], store=store)
        first = dispatcher.dispatch(TransferRequest(reason="one"))
        assert first.queued == ("desk",) and first.pending and first.stored
        assert dispatcher.close() and got == [first.request.request_id]
        second = dispatcher.dispatch(TransferRequest(reason="two"))
        assert dispatcher.join(10) and len(got) == 2
        rows = store.repository(HandoffRepository).pending(None)
        dispatcher.close()
    assert {r["request_id"]: r["status"] for r in rows} == {
        first.request.request_id: "delivered", second.request.request_id: "delivered"}


def test_a_retry_answered_409_while_the_delivery_is_in_flight_stays_delivered(
    kv_url: str,
) -> None:
    # the first POST (the background delivery) is answered after 2 s; the retry racing
    # it gets 409: the receiver already has that webhook-id
    with webhook_receiver([2.0, 409]) as desk, Store(kv_url) as store:
        hook = WebhookHook(desk.url, timeout_s=5, name="desk")
        dispatcher = TransferDispatcher([hook], store=store)
        outcome = dispatcher.dispatch(TransferRequest(reason="race"))
        deadline = time.monotonic() + 5
        while not desk.received and time.monotonic() < deadline:
            time.sleep(0.01)
        racing = TransferDispatcher([WebhookHook(desk.url, name="desk")], store=store,
                                    delivery="sync")
        assert racing.retry_pending() == (1, 0)  # the 409 counts as delivered
        assert dispatcher.join(10)
        rows = store.repository(HandoffRepository).pending(None)
        dispatcher.close()
    assert len(desk.received) == 2
    assert [(r["request_id"], r["status"]) for r in rows] == [
        (outcome.request.request_id, "delivered")]


def test_a_late_failure_never_reopens_a_delivered_or_resolved_row(kv_url: str) -> None:
    release = threading.Event()
    entered = threading.Event()

    def failing(request: TransferRequest) -> None:
        entered.set()
        release.wait(10)
        raise ConnectionError("helpdesk down")

    with Store(kv_url) as store:
        repo = store.repository(HandoffRepository)
        slow = TransferDispatcher([CallableHook(failing, name="desk")], store=store,
                                  attempts=1)
        # a person resolves the request while its delivery is failing
        resolved = slow.dispatch(TransferRequest(reason="person")).request.request_id
        assert entered.wait(10)
        assert repo.set_status(resolved, "resolved") == 1
        release.set()
        assert slow.join(10)
        # a retry delivers the request while the original delivery is failing
        release.clear()
        entered.clear()
        delivered = slow.dispatch(TransferRequest(reason="retry")).request.request_id
        assert entered.wait(10)
        working = TransferDispatcher([CallableHook(lambda r: None, name="desk")], store=store)
        assert working.retry_pending() == (1, 0)
        release.set()
        assert slow.join(10)
        states = {r["request_id"]: r for r in repo.pending(None)}
        assert repo.set_status(delivered, "pending") == 0  # never backwards, not even asked
        slow.close()
    assert states[resolved]["status"] == "resolved" and states[resolved]["resolved_at"]
    assert states[delivered]["status"] == "delivered" and states[delivered]["error"] is None


def test_retry_limit_reaches_past_rows_of_a_removed_hook(tmp_path: Path) -> None:
    with webhook_receiver([200]) as desk:
        config = write_config(tmp_path / "router.yaml", desk.url)
        with AgentRouter.from_config(config) as router:
            assert router.transfer is not None
            old = TransferDispatcher([CallableHook(lambda r: 1 / 0, name="old-desk")],
                                     store=router.store, attempts=1, delivery="sync")
            for i in range(12):  # stored first, for a hook the config no longer has
                old.dispatch(TransferRequest(reason=f"old {i}"))
            TransferDispatcher(store=router.store).dispatch(TransferRequest(reason="nobody"))
            for i in range(3):  # then three for the configured webhook, stored pending
                router.transfer.accept(TransferRequest(reason=f"webhook {i}"))
        out = run_cli("handoffs", "--config", str(config), "--retry", "--limit", "10", "--json")
        text = run_cli("handoffs", "--config", str(config), "--retry", "--limit", "10")
    assert out["delivered"] == 3 and out["unconfigured"] == {"(no hook)": 1, "old-desk": 12}
    assert out["pending"] == 13  # the unconfigured ones: reported and left alone
    assert len(desk.received) == 3
    assert "0 delivered, 13 still pending" in text
    flat = " ".join(text.split())
    assert "13 hook rows pending for hooks not in the config" in flat
    assert "old-desk (12)" in flat


def test_status_all_shows_the_true_fields_of_delivered_rows(tmp_path: Path) -> None:
    with webhook_receiver([500, 500, 200]) as desk:
        config = write_config(tmp_path / "router.yaml", desk.url, delivery="sync")
        with AgentRouter.from_config(config) as router:
            assert router.transfer is not None
            outcome = router.transfer.dispatch(TransferRequest(reason="flaky desk"))
        pending = run_cli("handoffs", "--config", str(config), "--json")
        # one delivery try (the webhook made its 2 attempts within it), its last error
        assert pending[0]["attempts"] == 1 and "HTTP 500" in pending[0]["error"]
        assert run_cli("handoffs", "--config", str(config), "--retry", "--json")["delivered"] == 1
        rows = run_cli("handoffs", "--config", str(config), "--status", "all", "--json")
        table = run_cli("handoffs", "--config", str(config), "--status", "all")
    assert outcome.pending and not outcome.delivered
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "delivered" and row["attempts"] == 2  # 1 failed, 1 delivered
    assert row["error"] is None and row["delivered_at"]  # no stale error, a true time
    assert "[delivered 20" in table and "not delivered yet" not in table
    assert "HTTP 500" not in table


def left_pending_by_an_earlier_process(url: str) -> str:
    """The id of a hand-off an earlier process stored and failed to deliver (hook
    ``desk``), unchanged for 0.3 s since."""
    def down(request: TransferRequest) -> None:
        raise ConnectionError("helpdesk down")

    with Store(url) as store:
        earlier = TransferDispatcher([CallableHook(down, name="desk")], store=store,
                                     attempts=1, delivery="sync")
        left = earlier.dispatch(TransferRequest(reason="left behind")).request.request_id
    time.sleep(0.3)
    return left


def test_the_next_process_retries_what_an_earlier_one_left_pending(kv_url: str) -> None:
    left = left_pending_by_an_earlier_process(kv_url)
    got: list[str] = []
    with Store(kv_url) as store:  # the next one retries it as soon as it hands over
        section = HandoffSection(dispatch_retry_interval_s=0.2)
        later = TransferDispatcher([CallableHook(lambda r: got.append(r.request_id),
                                                 name="desk")], store=store, settings=section)
        new = later.dispatch(TransferRequest(reason="new")).request.request_id
        assert later.join(10)
        later.close()
        rows = {r["request_id"]: r for r in store.repository(HandoffRepository).pending(None)}
    assert sorted(got) == sorted([left, new])
    assert rows[left]["status"] == "delivered" and rows[left]["attempts"] == 2


def test_a_full_queue_leaves_the_request_pending_for_later(kv_url: str) -> None:
    release = threading.Event()
    with Store(kv_url) as store:
        section = HandoffSection(dispatch_queue_size=1, dispatch_retry_interval_s=0)
        dispatcher = TransferDispatcher([CallableHook(lambda r: release.wait(10), name="desk")],
                                        store=store, settings=section)
        outcomes = [dispatcher.dispatch(TransferRequest(reason=str(i))) for i in range(3)]
        release.set()
        assert dispatcher.join(10)
        dispatcher.close()
        rows = {r["request_id"]: r["status"] for r in
                store.repository(HandoffRepository).pending(None)}
    assert outcomes[0].queued == ("desk",)  # in delivery
    assert [o.queued for o in outcomes[1:]].count(()) >= 1  # the queue held one more at most
    assert all(o.pending and o.stored for o in outcomes)
    assert sorted(rows.values()).count("pending") >= 1  # not lost: stored for a retry


def test_delivery_sync_in_the_router_config_applies_to_a_handoff_runnables_hooks() -> None:
    fired: list[str] = []
    config = RouterConfig.model_validate(
        {"store": "mem://", "agents": ["bot"], "handoff": {"delivery": "sync"}})
    desk = CallableHook(lambda r: fired.append(r.request_id), name="desk")
    with config.build_router() as router, HandoffRunnable(
            faq_store(), RunnableLambda(lambda x: "answer"), confidence=CONFIDENCE,
            router=router, hooks=[desk]) as rag:
        out = rag.invoke(UNCOVERED)
    assert isinstance(out, HandoffResult) and out.outcome is not None
    assert out.outcome.delivered and out.outcome.queued == ()  # delivered before returning
    assert fired == [out.request.request_id]


def test_close_finishes_the_deliveries_of_a_handoff_runnables_own_hooks() -> None:
    """hooks= given to the runnable: its close() waits for them; the router's dispatcher,
    which the runnable only borrows, is left to the router."""
    fired: list[str] = []
    release = threading.Event()

    def slow(request: TransferRequest) -> None:
        release.wait(5)
        fired.append(request.request_id)

    with AgentRouter(agents=["bot"], store="mem://") as router:
        rag = HandoffRunnable(faq_store(), RunnableLambda(lambda x: "answer"),
                              confidence=CONFIDENCE, router=router,
                              hooks=[CallableHook(slow, name="desk")])
        borrowing = HandoffRunnable(faq_store(), RunnableLambda(lambda x: "answer"),
                                    confidence=CONFIDENCE, router=router)
        out = rag.invoke(UNCOVERED)
        assert isinstance(out, HandoffResult) and out.outcome is not None
        assert out.outcome.queued == ("desk",) and fired == []  # on the background worker
        assert rag.owns_dispatcher and not borrowing.owns_dispatcher
        assert borrowing.close(timeout_s=0.1)  # nothing of its own to close
        assert not rag.close(timeout_s=0.2)  # the hook is still running: bounded, says so
        release.set()
        assert rag.close(timeout_s=5)
        assert fired == [out.request.request_id]
        rows = router.store.repository(HandoffRepository).pending(None)
        assert [(r["request_id"], r["status"]) for r in rows] == [
            (out.request.request_id, "delivered")]


def test_an_opened_router_retries_what_a_crashed_process_left_without_a_new_hand_off(
        kv_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    left = left_pending_by_an_earlier_process(kv_url)
    config = tmp_path / "router.yaml"  # a command is not the app: it does not deliver
    config.write_text(f"store: {kv_url}\nagents: [a]\nhooks:\n  - type: callable\n"
                      f"    target: {__name__}:forbidden_hook\n    name: desk\n"
                      "handoff: {dispatch_retry_interval_s: 0.2}\n")
    assert run(capsys, "handoffs", "-c", str(config)).code == 0
    assert run(capsys, "profiles", "-c", str(config)).code == 0
    assert DELIVERED_BY_A_COMMAND == []
    got: list[str] = []
    section = HandoffSection(dispatch_retry_interval_s=0.2)
    hook = CallableHook(lambda r: got.append(r.request_id), name="desk")
    with AgentRouter(agents=["a"], store=kv_url,
                     transfer=TransferDispatcher([hook], settings=section)):
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:  # no select, no new hand-off
            time.sleep(0.05)
    assert got == [left]


DELIVERED_BY_A_COMMAND: list[str] = []


def forbidden_hook(request: TransferRequest) -> None:
    DELIVERED_BY_A_COMMAND.append(request.request_id)


def test_close_waits_for_a_sweeps_delivery_in_flight(kv_url: str) -> None:
    """A sweep delivers on the worker thread, not through the queue: close() gives it
    its time too, rather than leave an accepted delivery to be sent again."""
    left = left_pending_by_an_earlier_process(kv_url)
    inside, release = threading.Event(), threading.Event()

    def slow(request: TransferRequest) -> None:
        inside.set()
        assert release.wait(30)

    with Store(kv_url) as store:
        section = HandoffSection(dispatch_retry_interval_s=0.2)
        sweeper = TransferDispatcher([CallableHook(slow, name="desk")], store=store,
                                     settings=section)
        sweeper.bind_store(store)  # starts the worker: its first sweep takes the row
        assert inside.wait(10)
        threading.Timer(0.5, release.set).start()
        assert sweeper.close(10)
        rows = {r["request_id"]: r for r in store.repository(HandoffRepository).pending(None)}
    assert rows[left]["status"] == "delivered"

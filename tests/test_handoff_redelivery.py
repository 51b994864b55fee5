"""Re-delivering what stayed pending: ``retry_pending`` (``trustroute handoffs --retry``)
and the background sweep of several workers (router/handoff/transfer/redelivery.py)."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from surreal_fixtures import Target
from test_transfer_dispatcher import Flaky, make_request

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer import (
    CallableHook,
    HookRejected,
    TransferDispatcher,
    TransferRequest,
)


def test_retry_pending_delivers_and_closes() -> None:
    flaky = Flaky(failures=3)
    with Store("mem://") as store:
        dispatcher = TransferDispatcher([flaky], store=store, backoff_s=0, delivery="sync")
        req = make_request()
        assert dispatcher.dispatch(req).pending
        assert [r["request_id"] for r in dispatcher.pending()] == [req.request_id]
        assert dispatcher.retry_pending() == (1, 0)
        repo = store.repository(HandoffRepository)
        assert repo.pending() == []
        assert repo.pending("delivered")[0]["request_id"] == req.request_id


def test_retry_pending_keeps_failures_and_unknown_hooks() -> None:
    with Store("mem://") as store:
        TransferDispatcher([Flaky(99)], store=store, backoff_s=0,
                           delivery="sync").dispatch(make_request())
        TransferDispatcher(store=store, delivery="sync").dispatch(make_request())  # "(no hook)" row
        again = TransferDispatcher([Flaky(99)], store=store, backoff_s=0, attempts=2,
                                   delivery="sync")
        assert again.retry_pending() == (0, 2)
        rows = {r["hook"]: r for r in again.pending()}
    assert rows["flaky"]["attempts"] == 5


def test_retry_delivers_rows_stored_before_the_identifier_rules_and_skips_unreadable(
        caplog: pytest.LogCaptureFixture) -> None:
    """A row an older version accepted (a control character in its task type) is still
    delivered as it was; a row whose request cannot be read stays pending without
    holding up the others."""
    got: list[TransferRequest] = []
    old = make_request().payload() | {"task_type": "billing\x07"}
    broken = make_request().payload() | {"confidence": 7.0}  # not a probability
    ok = make_request()
    with Store("mem://") as store:
        repo = store.repository(HandoffRepository)
        for row in (old, broken, ok.payload()):
            repo.save_pending(row, hook="desk", error="receiver down")
        dispatcher = TransferDispatcher([CallableHook(got.append, name="desk")], store=store,
                                        delivery="sync")
        with caplog.at_level(logging.ERROR):
            assert dispatcher.retry_pending() == (2, 1)
        assert sorted(r.request_id for r in got) == sorted([old["request_id"], ok.request_id])
        assert {r.task_type for r in got} == {"billing\x07", None}
        assert [r["request_id"] for r in repo.pending()] == [broken["request_id"]]
    assert f"hand-off {broken['request_id']}: stored request unreadable" in caplog.text
    with pytest.raises(ValueError, match="task_type must not contain control characters"):
        TransferRequest(input="x", reason="r", task_type="billing\x07")  # new ones: refused


class Receiver:
    """A receiver that is down until ``up``, then refuses the requests whose reason is
    ``refused`` (an answer: HookRejected) and takes the rest."""

    def __init__(self, name: str) -> None:
        self.name, self.up, self.got = name, False, []  # type: list[str]

    def __call__(self, request: TransferRequest) -> None:
        if not self.up:
            raise ConnectionError(f"{self.name} down")
        if request.reason == "refused":
            raise HookRejected(f"{self.name} refused it (HTTP 422)")
        self.got.append(request.reason)


def test_a_sweep_goes_past_a_refused_row_and_one_hook_down_starves_no_other() -> None:
    desk, chat = Receiver("desk"), Receiver("chat")
    with Store("mem://") as store:
        dispatcher = TransferDispatcher([desk, chat], store=store, attempts=1,
                                        delivery="sync")
        for reason in ("refused", "a", "b", "c"):  # both receivers down: 8 rows pending
            dispatcher.dispatch(make_request().model_copy(update={"reason": reason}))
        desk.up = True  # back, refusing the oldest of its rows; chat stays down
        # two rows a hook: desk's refused one then "a"; chat stops at its first failure
        assert dispatcher.retry_stale(0, limit=2) == (1, 2)
        assert (desk.got, chat.got) == (["a"], [])
        chat.up = True  # least recently tried first: the refused row waits its turn
        assert dispatcher.retry_stale(0, limit=2) == (4, 0)
        assert (desk.got, chat.got) == (["a", "b", "c"], ["a", "b"])
        assert dispatcher.retry_pending() == (1, 2)  # still pending: the two refused rows
        assert chat.got == ["a", "b", "c"]


def test_sweeps_of_several_workers_send_each_row_once() -> None:
    got: list[str] = []
    lock = threading.Lock()

    def desk(request: TransferRequest) -> None:
        time.sleep(0.005)  # a sweep is still sending when the others read the same rows
        with lock:
            got.append(request.request_id)

    with Store("mem://") as store:
        down = TransferDispatcher([Flaky(99, answer=None)], store=store, attempts=1,
                                  delivery="sync")
        down.hooks[0].name = "desk"
        left = [down.dispatch(make_request()).request.request_id for _ in range(30)]
        time.sleep(0.3)
        workers = [TransferDispatcher([CallableHook(desk, name="desk")], store=store)
                   for _ in range(3)]
        sweeps = [threading.Thread(target=w.retry_stale, args=(0.2,)) for w in workers]
        for sweep in sweeps:
            sweep.start()
        for sweep in sweeps:
            sweep.join(30)
    assert sorted(got) == sorted(left)  # each delivered, and once


def test_a_sweep_reads_the_age_of_rows_by_the_database_clock(surreal: Target) -> None:
    surreal.fixture.shift_clock(120)  # the database's clock runs 2 minutes ahead of ours
    got: list[str] = []
    with Store(surreal.url, **surreal.options()) as store:
        down = TransferDispatcher([Flaky(99)], store=store, attempts=1, delivery="sync")
        left = down.dispatch(make_request()).request.request_id
        time.sleep(0.3)
        up = TransferDispatcher([CallableHook(lambda r: got.append(r.request_id),
                                              name="flaky")], store=store)
        assert up.retry_stale(0.2) == (1, 0)  # by our clock the row is from the future
    assert got == [left]


class Busy(Exception):
    """A receiver's 'come back later', as a WebhookError carries a Retry-After."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"busy, retry after {retry_after:g} s")
        self.retry_after = retry_after


def test_a_sweep_waits_as_long_as_the_receiver_asked() -> None:
    asked = {"soon": 0.3, "later": 3600.0}
    got: list[str] = []

    def busy(request: TransferRequest) -> None:
        raise Busy(asked[request.reason or ""])

    with Store("mem://") as store:
        first = TransferDispatcher([CallableHook(busy, name="desk")], store=store,
                                   attempts=1, delivery="sync")
        for reason in asked:
            first.dispatch(make_request().model_copy(update={"reason": reason}))
        time.sleep(0.5)
        sweeper = TransferDispatcher([CallableHook(lambda r: got.append(r.reason or ""),
                                                   name="desk")], store=store)
        assert sweeper.retry_stale(0.1) == (1, 0)  # the other is held for an hour
        assert got == ["soon"]
        assert [r["reason"] for r in store.repository(HandoffRepository).pending()] == [
            "later"]  # still pending, shown, not lost


def test_a_row_queued_in_one_worker_and_swept_by_another_is_sent_once() -> None:
    """Worker A's queue is slow (its receiver takes long); worker B's sweep takes a row
    still waiting there and sends it; A's delivery then finds the row taken."""
    sent: list[tuple[str, str]] = []
    release = threading.Event()

    def hook(worker: str, hold: bool = False) -> CallableHook:
        def desk(request: TransferRequest) -> None:
            sent.append((worker, request.request_id))
            if hold and not release.is_set():
                assert release.wait(30)
        return CallableHook(desk, name="desk")

    with Store("mem://") as store:
        a = TransferDispatcher([hook("a", hold=True)], store=store,  # A does not sweep
                               settings=HandoffSection(dispatch_retry_interval_s=0))
        b = TransferDispatcher([hook("b")], store=store, delivery="sync")
        first, waiting = make_request(), make_request()
        a.dispatch(first)  # A's worker is held inside this one
        a.dispatch(waiting)  # ... so this one waits in A's queue
        while ("a", first.request_id) not in sent:
            time.sleep(0.01)
        # B's sweep, as after its interval: the row A is sending is younger than that
        assert b.retry_stale(0.0, frozenset({first.request_id})) == (1, 1)  # sent, skipped
        release.set()
        assert a.close(30)
    assert sorted(sent) == sorted([("a", first.request_id), ("b", waiting.request_id)])


def test_failing_retry_sweeps_warn_once_not_at_every_sweep(
        surreal: Target, caplog: pytest.LogCaptureFixture) -> None:
    server = surreal.fixture
    store = Store(surreal.url, **surreal.options(reconnect_timeout_s=0.1,
                                                 retry_max_wait_s=0.02))
    section = HandoffSection(dispatch_retry_interval_s=0.05)
    dispatcher = TransferDispatcher([CallableHook(lambda r: None, name="desk")], store=store,
                                    settings=section)
    try:
        dispatcher.dispatch(TransferRequest(reason="starts the worker"))
        assert dispatcher.join(10)
        with caplog.at_level("DEBUG", logger="trustroute"):
            server.stop()  # every sweep now fails
            deadline = time.monotonic() + 20
            while len(_sweep_logs(caplog)) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            server.start()
            while not any("works again" in r.getMessage() for r in _sweep_logs(caplog)) \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        dispatcher.close()
        store.close()
    logs = _sweep_logs(caplog)
    failed = [r for r in logs if "failed" in r.getMessage()]
    assert len(failed) >= 3  # sweeps went on
    assert [r.levelname for r in failed].count("WARNING") == 1
    assert [r.levelname for r in logs if "works again" in r.getMessage()] == ["WARNING"]


def _sweep_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "background retry" in r.getMessage()]


def test_a_closed_store_ends_the_retry_sweeps_quietly(
        kv_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """A dispatcher left open past its store's close (a runnable never closed) does not
    warn at every sweep of a store that can never work again: its worker ends."""
    store = Store(kv_url)
    dispatcher = TransferDispatcher([CallableHook(lambda r: None, name="desk")], store=store,
                                    settings=HandoffSection(dispatch_retry_interval_s=0.05))
    before = set(threading.enumerate())
    dispatcher.dispatch(TransferRequest(reason="starts the worker"))
    assert dispatcher.join(10)
    workers = [t for t in set(threading.enumerate()) - before
               if t.name == "trustroute-handoff"]
    assert len(workers) == 1
    with caplog.at_level("DEBUG", logger="trustroute"):
        store.close()
        for worker in workers:
            worker.join(10)
    assert store.closed
    assert not any(w.is_alive() for w in workers)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert dispatcher.close(1)

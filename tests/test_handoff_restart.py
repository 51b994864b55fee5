"""Hand-offs while the server restarts: a request accepted while the store cannot be
reached, whose hook fails too, is kept in memory only until the store answers again;
the background worker then stores it pending and a sweep delivers it (it is never lost
to a restart that coincides with a receiver outage). The first hand-off of a process
made during an outage does not raise either."""

from __future__ import annotations

import threading
import time

from surreal_fixtures import Target

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher, TransferRequest

SWEEP_S = 0.2


class Desk:
    """A receiver that refuses every hand-off while ``down`` is set."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.received: list[str] = []

    def __call__(self, request: TransferRequest) -> str:
        if self.down.is_set():
            raise ConnectionError("the desk is down")
        self.received.append(request.request_id)
        return "ok"


def open_router(surreal: Target, desk: Desk, sweep_s: float) -> AgentRouter:
    transfer = TransferDispatcher([CallableHook(desk, name="desk")], attempts=1,
                                  settings=HandoffSection(dispatch_retry_interval_s=sweep_s))
    return AgentRouter(agents=["a"], store=surreal.url, transfer=transfer,
                       store_options=surreal.options(reconnect_timeout_s=0.5,
                                                     retry_max_wait_s=0.1))


def test_a_hand_off_the_store_could_not_take_is_stored_and_delivered_once_it_is_back(
        surreal: Target) -> None:
    server, desk = surreal.fixture, Desk()
    with open_router(surreal, desk, SWEEP_S) as router:
        assert router.transfer is not None
        assert router.transfer.pending() == []  # the store has answered once
        server.stop()
        desk.down.set()  # the same outage takes the receiver down too
        outcome = router.transfer.dispatch(TransferRequest(request_id="r-1", input="q",
                                                           reason="low confidence"))
        assert outcome.pending and not outcome.stored
        assert router.transfer.join(10)
        assert [r.request_id for r, _ in router.transfer.undelivered] == ["r-1"]
        server.start()
        desk.down.clear()
        deadline = time.monotonic() + 30
        while not desk.received and time.monotonic() < deadline:
            time.sleep(0.05)
        assert desk.received == ["r-1"]
        assert router.transfer.undelivered == []
    with Store(surreal.url, **surreal.options()) as store:
        rows = store.repository(HandoffRepository).pending(None)
    assert [(r["request_id"], r["hook"], r["status"]) for r in rows] == [
        ("r-1", "desk", "delivered")]
    assert desk.received == ["r-1"]  # sent once


def test_the_first_hand_off_during_an_outage_is_kept_not_raised(surreal: Target) -> None:
    """Nothing of the hand-off tables was used yet when the store became unreachable:
    dispatch still does not raise for the store (as documented); the request is kept."""
    server, desk = surreal.fixture, Desk()
    with open_router(surreal, desk, 3600.0) as router:  # no sweep touches the store first
        assert router.transfer is not None
        server.stop()
        outcome = router.transfer.dispatch(TransferRequest(request_id="r-2", input="q",
                                                           reason="low confidence"))
        assert outcome.pending and not outcome.stored
        assert router.transfer.join(10)
        assert desk.received == ["r-2"]  # delivered all the same: the receiver is up
        server.start()


def test_a_queued_hand_off_the_store_could_not_take_is_not_dropped_by_close(
        surreal: Target) -> None:
    """close() drops what is still queued because it is stored pending; a request queued
    while the store could not take it is not stored, so close() stores it (the store is
    back) instead of dropping it."""
    server, entered, release = surreal.fixture, threading.Event(), threading.Event()
    received: list[str] = []

    def slow_desk(request: TransferRequest) -> str:
        entered.set()
        release.wait(30)  # a receiver that holds the worker on the first request
        received.append(request.request_id)
        return "ok"

    transfer = TransferDispatcher([CallableHook(slow_desk, name="desk")], attempts=1,
                                  settings=HandoffSection(dispatch_retry_interval_s=3600.0))
    with AgentRouter(agents=["a"], store=surreal.url, transfer=transfer,
                     store_options=surreal.options(reconnect_timeout_s=0.5,
                                                   retry_max_wait_s=0.1)) as router:
        assert router.transfer is not None
        assert router.transfer.dispatch(TransferRequest(request_id="held", input="q",
                                                        reason="r")).stored
        assert entered.wait(30)  # the worker is in the hook with "held"
        server.stop()
        outcome = router.transfer.dispatch(TransferRequest(request_id="kept", input="q",
                                                           reason="r"))
        assert outcome.queued == ("desk",) and not outcome.stored
        server.start()
        router.transfer.close(0.2)  # "kept" still waits behind "held": dropped from the queue
        release.set()
        with Store(surreal.url, **surreal.options()) as store:
            rows = store.repository(HandoffRepository).pending(None)
        kept = [r for r in rows if r["request_id"] == "kept"]
        assert [(r["hook"], r["status"]) for r in kept] == [("desk", "pending")]
        assert router.transfer.undelivered == []

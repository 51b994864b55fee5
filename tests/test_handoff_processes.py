"""Hand-offs across OS processes against the test server: workers started together
retry what an earlier process left pending, each row sent once, through slow server
replies and a database clock that differs from theirs; a worker opened while its server
restarts waits for it instead of dying."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from surreal_fixtures import Target
from test_feedback_processes import read_line
from webhook_server import webhook_receiver

from trustroute.profiles.store import Store
from trustroute.router.handoff.transfer import (
    CallableHook,
    TransferDispatcher,
    TransferRequest,
)

WORKER = Path(__file__).with_name("handoff_worker.py")

pytestmark = pytest.mark.slow


def leave_pending(surreal: Target, count: int) -> list[str]:
    """Hand-offs an earlier process stored for hook ``desk`` and failed to deliver."""
    def down(request: TransferRequest) -> None:
        raise ConnectionError("helpdesk down")

    with Store(surreal.url, **surreal.options()) as store:
        earlier = TransferDispatcher([CallableHook(down, name="desk")], store=store,
                                     attempts=1, delivery="sync")
        return [earlier.dispatch(TransferRequest(reason=f"left {i}")).request.request_id
                for i in range(count)]


def test_workers_started_together_send_each_pending_hand_off_once(
        surreal: Target) -> None:
    left = leave_pending(surreal, 12)
    surreal.fixture.delay_replies(0.02)  # every store round trip is slow ...
    surreal.fixture.shift_clock(30)  # ... and the database's clock steps 30 s ahead
    with webhook_receiver([0.05]) as desk:  # a receiver that takes its time to answer
        workers = [subprocess.Popen(
            [sys.executable, str(WORKER), surreal.url, surreal.database, desk.url, "8"],
            env=surreal.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
        for proc in workers:
            assert read_line(proc) == "open"
        for proc in workers:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        sent = Counter(r.headers["webhook-id"] for r in desk.received)
    assert sorted(sent) == sorted(left)  # all of them, by the workers, without a new one
    assert set(sent.values()) == {1}  # each once


def test_a_store_opened_while_its_server_restarts_waits_for_it(surreal: Target) -> None:
    server = surreal.fixture
    server.stop()
    opened: list[str] = []

    def open_store() -> None:
        with Store(surreal.url, **surreal.options()) as store:
            opened.append(store.url)

    opening = threading.Thread(target=open_store)
    opening.start()
    time.sleep(3)  # down for 3 s while a worker starts
    server.start()
    opening.join(30)
    assert opened == [surreal.url]

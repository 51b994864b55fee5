"""Hand-offs after an abstention are stored before delivery: SIGKILL loses none, and
``close()`` waits a bounded time (real processes, real embedded SurrealDB)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher, TransferRequest
from trustroute.router.trust.abstention import AbstentionPolicy

HOOK = "helpdesk"

# a router whose every select abstains (weak_resonance), handing off through a hook that
# never returns: the first request hangs in delivery, the other nine wait behind it
CHILD = textwrap.dedent(
    """
    import sys, threading
    from trustroute.router import AgentRouter
    from trustroute.router.handoff.transfer import CallableHook, TransferDispatcher
    from trustroute.router.trust.abstention import AbstentionPolicy

    def hang(request):
        threading.Event().wait()

    dispatcher = TransferDispatcher([CallableHook(hang, name=%(hook)r)], delivery="sync")
    router = AgentRouter(agents=["a", "b"], store=%(url)r, seed=0,
                         strategy="confidence_weighted", transfer=dispatcher,
                         abstention=AbstentionPolicy(on_abstain="human"))
    for agent in ("a", "b"):
        for _ in range(5):
            router.record(agent_id=agent, task_type="code", success=False, quality=0.1)
    ids = []
    for i in range(10):
        decision = router.select("code", context={"n": i})
        assert decision.abstained
        ids.append(decision.decision_id)
    print("returned", " ".join(ids), flush=True)
    threading.Event().wait()
    """
)


def _abstaining_router(url: str, dispatcher: TransferDispatcher) -> AgentRouter:
    router = AgentRouter(agents=["a", "b"], store=url, seed=0, strategy="confidence_weighted",
                         transfer=dispatcher, abstention=AbstentionPolicy(on_abstain="human"))
    for agent in ("a", "b"):
        for _ in range(5):
            router.record(agent_id=agent, task_type="code", success=False, quality=0.1)
    return router


def test_sigkill_after_ten_abstentions_loses_no_hand_off(kv_url: str) -> None:
    script = CHILD % {"hook": HOOK, "url": kv_url}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert line[0] == "returned" and len(line) == 11
    decision_ids = set(line[1:])

    delivered: Counter[str] = Counter()

    def working(request: TransferRequest) -> None:
        delivered[request.request_id] += 1

    with Store(kv_url) as store:
        repo = store.repository(HandoffRepository)
        rows = repo.pending()
        assert len(rows) == 10 and {r["hook"] for r in rows} == {HOOK}
        assert {r["request"]["decision_id"] for r in rows} == decision_ids
        dispatcher = TransferDispatcher([CallableHook(working, name=HOOK)], store=store,
                                        delivery="sync")
        assert dispatcher.retry_pending() == (10, 0)
        assert dispatcher.retry_pending() == (0, 0)  # delivered rows are not retried
        assert repo.pending() == []
        assert [r["status"] for r in repo.pending(None)] == ["delivered"] * 10
    assert sorted(delivered.values()) == [1] * 10
    assert set(delivered) == {r["request_id"] for r in rows}


def test_close_returns_within_the_bound_and_leaves_the_hand_off_pending(kv_url: str) -> None:
    release = threading.Event()
    started = threading.Event()

    def hang(request: TransferRequest) -> None:
        started.set()
        release.wait(30)

    dispatcher = TransferDispatcher([CallableHook(hang, name=HOOK)],
                                    settings=HandoffSection(dispatch_close_timeout_s=0.5),
                  delivery="sync")
    router = _abstaining_router(kv_url, dispatcher)
    try:
        decision = router.select("code")
        assert decision.abstained and started.wait(5)
        begun = time.monotonic()
        router.close()
        took = time.monotonic() - begun
        assert took < 3.0, took  # the bound (0.5 s) plus the flush, on a loaded machine
        with Store(kv_url) as store:
            rows = store.repository(HandoffRepository).pending()
        assert [(r["request"]["decision_id"], r["hook"]) for r in rows] == [
            (decision.decision_id, HOOK)]
    finally:
        release.set()  # the hung delivery ends (it cannot mark a closed store)


def test_a_delivered_hand_off_is_marked_once_and_never_retried(kv_url: str) -> None:
    received: list[str] = []
    dispatcher = TransferDispatcher([CallableHook(lambda r: received.append(r.request_id),
                                                  name=HOOK)], delivery="sync")
    with _abstaining_router(kv_url, dispatcher) as router:
        decision = router.select("code")
    assert decision.abstained and len(received) == 1  # close() waited for it
    with Store(kv_url) as store:
        repo = store.repository(HandoffRepository)
        assert repo.pending() == []
        rows = repo.pending(None)
        assert [(r["request_id"], r["status"]) for r in rows] == [(received[0], "delivered")]
        again = TransferDispatcher([CallableHook(lambda r: received.append(r.request_id),
                                                 name=HOOK)], store=store, delivery="sync")
        assert again.retry_pending() == (0, 0)
        assert repo.mark_delivered(received[0], HOOK) is False  # only pending rows change
    assert len(received) == 1


def test_a_failing_hook_leaves_the_stored_row_pending_with_its_error(kv_url: str) -> None:
    def broken(request: TransferRequest) -> None:
        raise ConnectionError("helpdesk down")

    with Store(kv_url) as store:
        dispatcher = TransferDispatcher([CallableHook(broken, name=HOOK)], store=store,
                                        attempts=2, backoff_s=0.0, delivery="sync")
        outcome = dispatcher.dispatch(TransferRequest(reason="test"))
        rows = store.repository(HandoffRepository).pending()
    assert outcome.pending and outcome.stored
    assert [(r["hook"], r["attempts"]) for r in rows] == [(HOOK, 2)]
    assert rows[0]["error"] == "ConnectionError: helpdesk down"

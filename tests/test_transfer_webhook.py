"""The webhook hook against a real HTTP server on 127.0.0.1, end to end to the store."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import logging
import time
from pathlib import Path

import pytest
from cli_helpers import run
from webhook_server import Redirect, Throttle, Trickle, webhook_receiver

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router import AgentRouter
from trustroute.router.handoff.transfer import (
    HookRejected,
    TransferDispatcher,
    TransferOutcome,
    TransferRequest,
    WebhookError,
    WebhookHook,
)

SECRET_ENV = "TRUSTROUTE_TEST_WEBHOOK_SECRET"
SECRET = "whsec_" + base64.b64encode(b"s3cr3t-do-not-log-0123456789").decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"another-key-entirely-987654321").decode()


def request(**fields: object) -> TransferRequest:
    base: dict[str, object] = {
        "input": {"question": "Can I get a refund in Bitcoin?"},
        "reason": "Retrieval insufficient",
        "confidence": 0.21,
        "diagnostics": {"max_score": 0.41, "hits": 5},
        "run_id": "run-1",
        "task_type": "support",
    }
    return TransferRequest(**{**base, **fields})  # type: ignore[arg-type]


def test_success_posts_the_json_payload() -> None:
    with webhook_receiver([200]) as server:
        req = request()
        status = WebhookHook(server.url, timeout_s=2.0)(req)
    assert status == 200
    assert len(server.received) == 1
    got = server.received[0]
    assert got.path == "/hooks/handoff"
    assert got.json() == req.payload()
    assert got.json()["input"] == {"question": "Can I get a refund in Bitcoin?"}
    assert got.headers["Content-Type"].startswith("application/json")
    assert got.headers["webhook-id"] == got.headers["X-Trustroute-Request-Id"] == req.request_id
    assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 60
    assert "webhook-signature" not in got.headers  # no secret_env: unsigned


def test_hmac_signature_verified_by_the_receiver(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    caplog.set_level(logging.DEBUG)
    with webhook_receiver([200], secret=SECRET) as server:
        hook = WebhookHook(server.url, secret_env=SECRET_ENV, backoff_s=0)
        assert hook(request()) == 200
    assert server.received[0].signature_ok is True
    assert SECRET not in caplog.text and SECRET not in repr(hook)
    assert SECRET not in str(hook.describe())


def test_wrong_secret_is_rejected_by_the_receiver_and_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, OTHER_SECRET)
    with webhook_receiver([200], secret=SECRET) as server:
        hook = WebhookHook(server.url, secret_env=SECRET_ENV, backoff_s=0)
        with pytest.raises(WebhookError, match="rejected with HTTP 401; not retried") as err:
            hook(request())
    assert server.received[0].signature_ok is False
    assert len(server.received) == 1  # a 4xx is final
    assert OTHER_SECRET not in str(err.value)
    assert isinstance(err.value, HookRejected)  # the receiver is up: a sweep goes on


def test_a_410_gone_endpoint_is_sent_nothing_more_and_its_hand_offs_stay_pending(
        caplog: pytest.LogCaptureFixture) -> None:
    with webhook_receiver([410]) as server, Store("mem://") as store:
        hook = WebhookHook(server.url, backoff_s=0)
        dispatcher = TransferDispatcher([hook], store=store)
        with caplog.at_level(logging.WARNING, logger="trustroute"):
            outcomes = [dispatcher.deliver(dispatcher.accept(request(run_id=f"run-{i}")))
                        for i in range(3)]
            with pytest.raises(HookRejected, match="410 Gone before; not sent"):
                asyncio.run(hook.acall(request()))
        rows = store.repository(HandoffRepository).pending(None)
    assert len(server.received) == 1 and hook.gone
    assert not any(o.delivered for o in outcomes)
    assert [r["status"] for r in rows] == ["pending"] * 3
    assert caplog.text.count("answered 410 Gone; nothing more is sent") == 1
    with Store("mem://") as store:  # a sweep leaves its rows alone: no warning per row
        dispatcher = TransferDispatcher([hook], store=store, delivery="sync")
        dispatcher.dispatch(request())
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="trustroute"):
            assert dispatcher.retry_stale(0.0) == (0, 0)
        assert caplog.text == ""


def test_missing_secret_env_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with webhook_receiver([200]) as server:
        hook = WebhookHook(server.url, secret_env=SECRET_ENV)
        with pytest.raises(WebhookError, match=f"{SECRET_ENV} \\(secret_env\\) is not set"):
            hook(request())
        assert server.received == []


def test_500_then_success_is_retried_with_the_same_request() -> None:
    with webhook_receiver([500, 503, 200]) as server:
        hook = WebhookHook(server.url, attempts=3, backoff_s=0.01)
        assert hook(request()) == 200
    assert len(server.received) == 3
    ids = {r.headers["webhook-id"] for r in server.received}
    assert len(ids) == 1
    assert server.received[0].body == server.received[2].body


def test_timeout_is_retried_then_fails() -> None:
    with webhook_receiver([0.6]) as server:
        hook = WebhookHook(server.url, timeout_s=0.1, attempts=2, backoff_s=0.01)
        with pytest.raises(WebhookError, match=r"after 2 attempt\(s\): timed out after 0.1 s"):
            hook(request())
    assert len(server.received) == 2


def test_timeout_then_success() -> None:
    with webhook_receiver([0.6, 200]) as server:
        hook = WebhookHook(server.url, timeout_s=0.1, attempts=3, backoff_s=0.01)
        assert hook(request()) == 200


def test_refused_connection_fails_after_retries() -> None:
    with webhook_receiver([200]) as server:
        url = server.url
    hook = WebhookHook(url + "?token=abc", attempts=2, backoff_s=0.01)
    with pytest.raises(WebhookError, match="connection failed") as err:
        hook(request())
    assert "token=abc" not in str(err.value)  # query strings (tokens) are never echoed


def test_async_delivery() -> None:
    with webhook_receiver([500, 200]) as server:
        hook = WebhookHook(server.url, backoff_s=0.01)
        assert asyncio.run(hook.acall(request())) == 200
    assert len(server.received) == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"url": "ftp://example.com?token=abc"}, "http:// or https://"),
        ({"url": "http://x", "timeout_s": 0}, "timeout_s: expected a value greater than 0"),
        ({"url": "http://x", "attempts": 0}, "attempts: expected a value greater than or"),
        ({"url": "http://x", "timout_s": 1}, "unknown key 'timout_s' .did you mean 'timeout_s'"),
        ({"url": "http:///x?token=abc"}, "url: must name a host"),
        ({"url": "https://"}, "url: must name a host"),
        ({"url": "http://127.0.0.1:99999/h?token=abc"}, r"a port within 1-65535"),
        ({"url": "http://exa mple.com/h?token=abc"}, "without spaces"),
        ({"url": "http://x", "headers": {"Authorization": "Bearer token=abc\n"}},
         "the value of header 'Authorization' holds a line break"),
        ({"url": "http://x", "headers": {"Bad Name": "token=abc"}}, "not an HTTP header name"),
        ({"url": "http://x", "name": "x" * 300}, "name is 300 characters long"),
        ({"url": "http://x", "max_backoff_s": 1e9}, "max_backoff_s: expected a value less"),
    ],
)
def test_bad_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        WebhookHook(**kwargs)  # type: ignore[arg-type]
    assert "token=abc" not in str(err.value)  # inputs are never echoed
    assert "\n" not in str(err.value)  # one line


def dispatch(hook: WebhookHook, store: Store, mode: str) -> TransferOutcome:
    dispatcher = TransferDispatcher([hook], store=store, delivery="sync")
    if mode == "async":
        return asyncio.run(dispatcher.adispatch(request()))
    return dispatcher.dispatch(request())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_timeout_is_a_deadline_for_the_whole_attempt(mode: str) -> None:
    # one byte a second: no single read waits 2 s, but the whole answer would take 38 s
    with webhook_receiver([Trickle(interval_s=1.0)]) as server, Store("mem://") as store:
        hook = WebhookHook(server.url, timeout_s=2.0, attempts=1)
        started = time.monotonic()
        outcome = dispatch(hook, store, mode)
        elapsed = time.monotonic() - started
        rows = store.repository(HandoffRepository).pending()
    # far below the 38 s a per-read limit would allow; slack for a loaded machine
    assert 1.9 < elapsed < 5.0
    assert outcome.pending and outcome.stored
    assert len(server.received) == 1
    assert rows[0]["error"].endswith("after 1 attempt(s): timed out after 2 s")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_is_not_followed_and_stays_pending(
    mode: str, status: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    caplog.set_level(logging.DEBUG)
    with (
        webhook_receiver([200]) as elsewhere,
        webhook_receiver([Redirect(elsewhere.url + "?token=abc", status)]) as server,
        Store("mem://") as store,
    ):
        hook = WebhookHook(
            server.url + "?token=configured-token",
            attempts=2,
            backoff_s=0.01,
            secret_env=SECRET_ENV,
            headers={"Authorization": "Bearer canary-credential"},
        )
        outcome = dispatch(hook, store, mode)
        rows = store.repository(HandoffRepository).pending()
    # neither the signed body nor the credentials reached the other host, by any method
    assert elsewhere.received == []
    assert len(server.received) == 2  # a 3xx is a failed attempt, and retried
    assert all(r.method == "POST" for r in server.received)
    assert outcome.pending and outcome.stored and not outcome.delivered
    assert [r["request_id"] for r in rows] == [outcome.request.request_id]
    error = rows[0]["error"]
    assert f"after 2 attempt(s): HTTP {status}: redirect to http://127.0.0.1:" in error
    assert "not followed" in error
    # nor do they show in errors or in any log line, httpx's and httpcore's included
    assert "HTTP Request: POST http://127.0.0.1:" in caplog.text
    for secret in ("token=abc", "configured-token", "canary-credential", SECRET):
        assert secret not in error and secret not in caplog.text


def test_permanent_failure_is_pending_in_the_store(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "db"
    with webhook_receiver([500]) as server:
        hook = WebhookHook(server.url, attempts=3, backoff_s=0.01)
        with Store(f"surrealkv://{db}") as store, \
                caplog.at_level(logging.WARNING, logger="trustroute"):
            dispatcher = TransferDispatcher([hook], store=store, delivery="sync")
            req = request()
            outcome = dispatcher.dispatch(req)
    assert len(server.received) == 3
    # the webhook counts its own attempts: the line does not also say "after 1 attempt"
    assert "transfer hook webhook failed: WebhookError:" in caplog.text
    assert "failed after 3 attempt(s)" in caplog.text
    assert "after 1 attempt(s)" not in caplog.text
    assert outcome.pending and outcome.stored and not outcome.delivered
    assert outcome.deliveries[0].error is not None
    assert "HTTP 500" in outcome.deliveries[0].error
    with Store(f"surrealkv://{db}") as store:  # survives close and reopen
        rows = store.repository(HandoffRepository).pending()
    assert [r["request_id"] for r in rows] == [req.request_id]
    assert rows[0]["hook"] == "webhook" and rows[0]["status"] == "pending"
    assert "HTTP 500" in rows[0]["error"]
    assert TransferRequest.model_validate(rows[0]["request"]) == req


def test_permanent_failure_listed_by_trustroute_handoffs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with webhook_receiver([500, 500, 500, 200]) as server:
        config = tmp_path / "router.yaml"
        config.write_text(
            "store: surrealkv://db\n"
            "agents: [support-bot]\n"
            "hooks:\n"
            "  - type: webhook\n"
            f"    url: {server.url}\n"
            "    attempts: 3\n"
            "    backoff_s: 0.01\n"
            "  - type: logging\n"
            "handoff:\n"
            "  delivery: sync\n",
            encoding="utf-8",
        )
        with AgentRouter.from_config(config) as router:
            assert router.transfer is not None
            outcome = router.transfer.dispatch(request(input="where is my card?"))
        assert outcome.pending
        assert [d.hook for d in outcome.deliveries if d.delivered] == ["logging"]

        listed = run(capsys, "handoffs", "--config", str(config), "--json")
        assert listed.code == 0, listed.err
        rows = listed.json()
        assert len(rows) == 1
        assert rows[0]["request_id"] == outcome.request.request_id
        assert rows[0]["hook"] == "webhook" and "HTTP 500" in rows[0]["error"]
        table = run(capsys, "handoffs", "--config", str(config))
        assert table.code == 0 and outcome.request.request_id[:8] in table.out

        # the receiver is back: --retry delivers the stored request and closes it
        retried = run(capsys, "handoffs", "--config", str(config), "--retry")
        assert retried.code == 0, retried.err
        assert "1 delivered, 0 still pending" in retried.out
    assert len(server.received) == 4
    assert server.received[3].json()["request_id"] == outcome.request.request_id
    after = run(capsys, "handoffs", "--config", str(config), "--json")
    assert after.json() == []


def test_retry_after_is_waited_for_and_a_long_one_is_left_to_the_sweep() -> None:
    with webhook_receiver([Throttle("1"), 200]) as server:
        hook = WebhookHook(server.url, backoff_s=0.01, max_backoff_s=5)
        started = time.monotonic()
        assert hook(request()) == 200
        took = time.monotonic() - started
    assert len(server.received) == 2 and took >= 1.0  # not 0.01 s: what the receiver asked
    gmt = email.utils.formatdate(time.time() + 3600, usegmt=True)
    with webhook_receiver([Throttle(gmt, status=503)]) as server:
        hook = WebhookHook(server.url, attempts=5, backoff_s=0.01, max_backoff_s=5)
        with pytest.raises(WebhookError, match=r"HTTP 503 \(retry after 3\d{3}(\.\d+)? s\)") \
                as raised:
            hook(request())  # an hour is the sweep's wait, not this thread's
    assert raised.value.retry_after is not None and raised.value.retry_after > 3000
    assert len(server.received) == 1


def test_retry_says_which_rows_their_receiver_holds_and_until_when(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"surrealkv://{tmp_path / 'db'}"
    config = tmp_path / "router.yaml"
    config.write_text(f"store: {url}\nhooks:\n  - {{type: logging}}\n")
    with Store(url) as store:
        repo = store.repository(HandoffRepository)
        req = request()
        repo.save_pending(req.payload(), hook="logging", error="HTTP 429")
        repo.mark_failed(req.request_id, "logging", error="HTTP 429", attempts=1,
                         retry_after_s=3600)  # the receiver asked for an hour
    text = run(capsys, "handoffs", "--config", str(config), "--retry")
    assert text.code == 0, text.err
    assert "0 delivered, 1 still pending (1 held until " in text.out
    body = run(capsys, "handoffs", "--config", str(config), "--retry", "--json").json()
    assert body["held"] == 1 and body["held_until"].endswith("Z")

"""Standard Webhooks signatures against a real receiver on 127.0.0.1: verified by the
reference package and by the few lines docs/handoff.md shows, and a captured request
cannot be replayed later."""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook, WebhookVerificationError
from webhook_server import webhook_receiver

from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.handoff.transfer import (
    TransferDispatcher,
    TransferRequest,
    WebhookError,
    WebhookHook,
)

ENV = "TRUSTROUTE_TEST_WHSEC"
SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
DOC = Path(__file__).resolve().parent.parent / "docs" / "handoff.md"


def documented_verifier() -> Any:
    """``verify_webhook`` exactly as docs/handoff.md writes it."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    source = next(b for b in blocks if "def verify_webhook" in b)
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # the documentation's own code, so it cannot drift
    return namespace["verify_webhook"]


def lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def test_each_attempt_is_signed_and_verifies_with_the_reference_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    request = TransferRequest(input="my card never arrived", reason="no retrieval")
    with webhook_receiver([503, 200], secret=SECRET) as server:
        assert WebhookHook(server.url, secret_env=ENV, backoff_s=0.01)(request) == 200
    assert [r.signature_ok for r in server.received] == [True, True]  # standardwebhooks
    verify = documented_verifier()
    for got in server.received:
        headers = lower(got.headers)
        assert headers["webhook-id"] == request.request_id
        assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
        assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", headers["webhook-signature"])
        assert verify(SECRET, headers, got.body)
        assert Webhook(SECRET).verify(got.body, headers) == request.payload()
        assert not verify(SECRET, headers, got.body + b" ")  # the body is covered


def test_a_captured_request_cannot_be_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, SECRET)
    with webhook_receiver([200], secret=SECRET) as server:
        WebhookHook(server.url, secret_env=ENV)(TransferRequest(reason="no retrieval"))
    got = server.received[0]
    headers, verify = lower(got.headers), documented_verifier()
    assert verify(SECRET, headers, got.body)
    # the same bytes with a fresh timestamp: the signature covers the timestamp
    fresh = {**headers, "webhook-timestamp": str(int(time.time()) + 1)}
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(got.body, fresh)
    assert not verify(SECRET, fresh, got.body)
    # the same request ten minutes later: refused as stale
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 600)
    assert not verify(SECRET, headers, got.body)


def test_a_409_duplicate_counts_as_delivered() -> None:
    with webhook_receiver([409]) as server, Store("mem://") as store:
        dispatcher = TransferDispatcher([WebhookHook(server.url)], store=store)
        outcome = dispatcher.deliver(dispatcher.accept(TransferRequest(reason="dup")))
        rows = store.repository(HandoffRepository).pending(None)
    assert outcome.delivered and len(server.received) == 1
    assert [r["status"] for r in rows] == ["delivered"]


@pytest.mark.parametrize(
    ("secret", "problem"),
    [
        ("s3cr3t-plain-text-value", "must be written whsec_<base64 key>"),
        ("whsec_not*base64*at%all", "the part after whsec_ is not base64"),
        ("whsec_", "the key after whsec_ is empty"),
        ("whsec_" + base64.b64encode(b"sixteen-byte-key").decode(),
         "the key after whsec_ is 16 bytes; at least 24 random bytes are needed"),
    ],
)
def test_a_malformed_secret_sends_nothing_and_stays_pending(
    monkeypatch: pytest.MonkeyPatch, secret: str, problem: str
) -> None:
    monkeypatch.setenv(ENV, secret)
    with webhook_receiver([200]) as server, Store("mem://") as store:
        hook = WebhookHook(server.url, secret_env=ENV, name="helpdesk")
        with pytest.raises(WebhookError) as info:
            hook(TransferRequest(reason="x"))
        dispatcher = TransferDispatcher([hook], store=store)
        outcome = dispatcher.deliver(dispatcher.accept(TransferRequest(reason="x")))
        rows = store.repository(HandoffRepository).pending()
        assert server.received == []  # nothing unsigned or mis-signed went out
    message = str(info.value)
    assert "\n" not in message and ENV in message and problem in message
    assert message.startswith(f"webhook 'helpdesk': environment variable {ENV} (secret_env)")
    assert secret.removeprefix("whsec_") not in message or secret == "whsec_"
    assert outcome.pending and [r["hook"] for r in rows] == ["helpdesk"]
    assert problem in rows[0]["error"]

"""Hooks from the router config: by import path, built with their own defaults, the
hand-off section's retry settings, errors that name the hook, and no framework imports."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import pytest
from test_transfer_dispatcher import Flaky, make_request

from trustroute.router import AgentRouter
from trustroute.router.config import RouterConfig
from trustroute.router.handoff.settings import HandoffSection, RetrievalConfidenceConfig
from trustroute.router.handoff.transfer import (
    LoggingHook,
    TransferDispatcher,
    TransferRequest,
    WebhookHook,
)
from trustroute.router.handoff.transfer.callable_hook import import_target
from trustroute.router.handoff.transfer.logging_hook import LoggingSettings
from trustroute.router.handoff.transfer.webhook import WebhookSettings


def notify(request: TransferRequest) -> str:
    """Imported by path in the config test."""
    return f"notified {request.request_id}"


def test_callable_hook_by_import_path() -> None:
    assert import_target("test_transfer_config:notify") is notify
    assert import_target("test_transfer_config.notify") is notify
    with pytest.raises(ValueError, match="has no 'missing'"):
        import_target("test_transfer_config:missing")
    with pytest.raises(ValueError, match="cannot import"):
        import_target("no_such_module_xyz:f")


def test_router_from_config_dispatches_through_its_hooks() -> None:
    config = RouterConfig.model_validate(
        {
            "store": "mem://",
            "agents": ["a", "b"],
            "hooks": [
                {"type": "callable", "target": "test_transfer_config:notify"},
                {"type": "logging", "level": "INFO"},
            ],
            "handoff": {"dispatch_attempts": 2, "delivery": "sync"},
        }
    )
    with config.build_router() as router:
        assert router.transfer is not None and router.transfer.store is router.store
        assert router.transfer.attempts == 2
        decision = router.select("cards")
        req = TransferRequest.from_decision(decision, reason="weak_resonance", input={"q": 1})
        outcome = router.transfer.dispatch(req)
    assert outcome.delivered
    assert outcome.responses["notify"] == f"notified {req.request_id}"
    assert req.decision_id == decision.decision_id and req.task_type == "cards"
    assert req.source == "abstain"


def test_router_without_config_has_no_dispatcher_unless_given() -> None:
    with AgentRouter(agents=["a"], store="mem://") as router:
        assert router.transfer is None
    dispatcher = TransferDispatcher(delivery="sync")
    with AgentRouter(agents=["a"], store="mem://", transfer=dispatcher) as router:
        assert router.transfer is dispatcher and dispatcher.store is router.store


def test_duplicate_hook_names_are_rejected() -> None:
    config = RouterConfig.model_validate(
        {"store": "mem://", "hooks": [{"type": "logging"}, {"type": "logging"}]}
    )
    with pytest.raises(ValueError, match=r"names must be unique.*logging"):
        config.build_router()


def test_config_file_errors_name_the_hook(tmp_path: Any) -> None:
    from trustroute.router.config import ConfigError, load_config

    path = tmp_path / "router.yaml"
    path.write_text(
        "hooks:\n  - type: webhook\n    url: ftp://x\n  - type: pager\nhandoff:\n  locale: fr\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert "hooks.0.webhook.url: must start with http:// or https://" in text
    assert "hooks.1:" in text and "'pager'" in text
    assert "handoff.locale: locale 'fr' has no hand-off messages" in text


def test_dispatch_retries_come_from_the_handoff_section_and_keywords_win() -> None:
    section = HandoffSection(dispatch_attempts=4, dispatch_backoff_s=0.0)
    flaky = Flaky(failures=3)
    outcome = TransferDispatcher([flaky], settings=section,
                                 delivery="sync").dispatch(make_request())
    assert outcome.delivered and flaky.calls == 4
    again = Flaky(failures=3)
    outcome = TransferDispatcher([again], settings=section, attempts=2,
                                 delivery="sync").dispatch(make_request())
    assert outcome.pending and again.calls == 2
    assert TransferDispatcher(delivery="sync").attempts == HandoffSection().dispatch_attempts
    with pytest.raises(ValueError, match="dispatch_attempts"):
        TransferDispatcher(attempts=0, delivery="sync")
    with pytest.raises(ValueError, match="dispatch_backoff_s"):
        TransferDispatcher(backoff_s=-1, delivery="sync")


def test_handoff_section_overrides_are_retrieval_confidence_settings() -> None:
    overridable = set(HandoffSection.model_fields) - {
        "calibration", "message", "dispatch_attempts", "dispatch_backoff_s",
        "dispatch_max_backoff_s", "dispatch_close_timeout_s", "delivery",
        "dispatch_queue_size", "dispatch_retry_interval_s",
    }
    assert overridable <= set(RetrievalConfidenceConfig.model_fields)
    section = HandoffSection(score_threshold=0.55, locale="zh-CN", message="hi")
    assert section.overrides() == {"score_threshold": 0.55, "locale": "zh"}
    # the same bounds in the file as in code
    for name, bad in [("confidence_low_threshold", 1.5), ("min_hits", -1), ("locale", "fr")]:
        with pytest.raises(ValueError, match=name):
            HandoffSection.model_validate({name: bad})
        with pytest.raises(ValueError, match=name):
            RetrievalConfidenceConfig.model_validate({name: bad})


def test_hooks_from_config_have_the_hooks_own_defaults() -> None:
    config = RouterConfig.model_validate(
        {
            "store": "mem://",
            "hooks": [
                {"type": "webhook", "url": "https://helpdesk.example/hook"},
                {"type": "logging", "level": "info", "name": "audit"},
            ],
        }
    )
    with config.build_router() as router:
        assert router.transfer is not None
        webhook, logger = router.transfer.hooks
    assert isinstance(webhook, WebhookHook) and isinstance(logger, LoggingHook)
    assert webhook.settings == WebhookSettings(url="https://helpdesk.example/hook")
    assert logger.settings == LoggingSettings(level=logging.INFO, name="audit")


def test_router_config_hooks_do_not_import_integrations() -> None:
    code = (
        "import sys\n"
        "from trustroute.router.config import RouterConfig\n"
        "hooks = [{'type': 'logging'}, {'type': 'webhook', 'url': 'http://127.0.0.1:9/h'},\n"
        "         {'type': 'callable', 'target': 'json:dumps'}]\n"
        "config = RouterConfig.model_validate({'store': 'mem://', 'hooks': hooks})\n"
        "with config.build_router() as router:\n"
        "    assert len(router.transfer.hooks) == 3\n"
        "print(sorted(m for m in sys.modules if m.startswith('trustroute.integrations')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"

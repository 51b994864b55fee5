"""Config sections for hand-off: ``handoff:`` (thresholds, locale, calibration) and ``hooks:``.

Attached to ``RouterConfig`` in ``router/config/model.py``. Strict like every section:
an unknown key is an error. Example::

    handoff:
      calibration: support-kb      # thresholds saved by `trustroute calibrate-handoff --name`
      locale: zh
    hooks:
      - type: webhook
        url: https://helpdesk.example.com/hooks/handoff
        secret_env: HANDOFF_WEBHOOK_SECRET
      - type: logging
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from trustroute.router.handoff.confidence import RetrievalConfidence, coerce_config
from trustroute.router.handoff.messages import normalise_locale
from trustroute.router.handoff.transfer.callable_hook import CallableHook
from trustroute.router.handoff.transfer.dispatcher import TransferDispatcher
from trustroute.router.handoff.transfer.logging_hook import LoggingHook
from trustroute.router.handoff.transfer.webhook import WebhookHook

if TYPE_CHECKING:
    from trustroute.profiles.store import Store


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HandoffSection(_Strict):
    """Retrieval-confidence settings: a saved calibration and/or explicit thresholds.

    Precedence: reference defaults, then the named ``calibration`` from the store, then
    any threshold or locale given here. A setting left out (null) is not overridden.
    """

    calibration: str | None = Field(default=None, min_length=1, max_length=256)
    score_threshold: float | None = None
    min_hits: int | None = Field(default=None, ge=0)
    confidence_low_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    confidence_high_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    insufficient_penalty: float | None = Field(default=None, ge=0.0)
    max_evidence_tokens: int | None = Field(default=None, ge=0)
    locale: str | None = None
    message: str | None = None
    dispatch_attempts: int = Field(default=3, ge=1)

    @field_validator("locale")
    @classmethod
    def _locale(cls, value: str | None) -> str | None:
        return None if value is None else normalise_locale(value)

    def overrides(self) -> dict[str, Any]:
        """The thresholds set explicitly in this section."""
        skip = {"calibration", "message", "dispatch_attempts"}
        return {k: v for k, v in self.model_dump().items() if k not in skip and v is not None}

    def confidence(self, store: Store | None = None) -> RetrievalConfidence:
        """The RetrievalConfidence this section describes (loading a named calibration)."""
        if self.calibration is None:
            return RetrievalConfidence(coerce_config(None, **self.overrides()))
        if store is None:
            raise ValueError(
                f"handoff.calibration {self.calibration!r} needs a store to load it from"
            )
        return RetrievalConfidence.load(store, self.calibration, **self.overrides())


class CallableHookSpec(_Strict):
    """A Python function, by import path: ``target: mypackage.handoff:notify``."""

    type: Literal["callable"]
    target: str = Field(min_length=3)
    name: str | None = None


class LoggingHookSpec(_Strict):
    """One log line per hand-off."""

    type: Literal["logging"]
    logger: str = "trustroute.handoff"
    level: str = "WARNING"
    include_input: bool = False
    name: str = "logging"


class WebhookHookSpec(_Strict):
    """HTTP POST of the request as JSON, retried, optionally HMAC-signed."""

    type: Literal["webhook"]
    url: str
    timeout_s: float = Field(default=5.0, gt=0)
    attempts: int = Field(default=3, ge=1)
    backoff_s: float = Field(default=0.5, ge=0)
    max_backoff_s: float = Field(default=5.0, ge=0)
    secret_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    headers: dict[str, str] = Field(default_factory=dict)
    name: str = "webhook"

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value


class LangGraphHookSpec(_Strict):
    """Pause the running LangGraph graph with ``interrupt()`` (needs the langgraph extra)."""

    type: Literal["langgraph"]
    name: str = "langgraph"


HookSpec = Annotated[
    CallableHookSpec | LoggingHookSpec | WebhookHookSpec | LangGraphHookSpec,
    Field(discriminator="type"),
]


def build_hook(spec: Any) -> Any:
    """The hook object a spec describes."""
    if isinstance(spec, CallableHookSpec):
        return CallableHook(spec.target, name=spec.name)
    if isinstance(spec, LoggingHookSpec):
        return LoggingHook(
            spec.logger, level=spec.level, include_input=spec.include_input, name=spec.name
        )
    if isinstance(spec, WebhookHookSpec):
        return WebhookHook(
            spec.url,
            timeout_s=spec.timeout_s,
            attempts=spec.attempts,
            backoff_s=spec.backoff_s,
            max_backoff_s=spec.max_backoff_s,
            secret_env=spec.secret_env,
            headers=spec.headers,
            name=spec.name,
        )
    if isinstance(spec, LangGraphHookSpec):
        from trustroute.integrations.langgraph import LangGraphInterruptHook

        return LangGraphInterruptHook(name=spec.name)
    raise TypeError(f"unknown hook spec {type(spec).__name__}")


def build_dispatcher(
    hooks: list[Any], handoff: HandoffSection | None = None, store: Store | None = None
) -> TransferDispatcher:
    """A dispatcher over the configured hooks (pending requests go to ``store``)."""
    section = handoff or HandoffSection()
    names = [getattr(h, "name", None) for h in hooks]
    dupes = sorted({n for n in names if n and names.count(n) > 1})
    if dupes:
        raise ValueError(f"hooks: names must be unique (set name:), repeated: {', '.join(dupes)}")
    return TransferDispatcher(
        [build_hook(h) for h in hooks],
        store=store,
        attempts=section.dispatch_attempts,
        settings=section,
    )

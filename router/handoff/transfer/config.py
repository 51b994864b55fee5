"""The ``hooks:`` config section: a registry of hook kinds, and the dispatcher built from it.

Attached to ``RouterConfig`` in ``router/config/model.py`` next to ``handoff:``
(``HandoffSection`` in ``router/handoff/settings.py``). Strict like every section: an
unknown key is an error. Example::

    hooks:
      - type: webhook
        url: https://helpdesk.example.com/hooks/handoff
        secret_env: HANDOFF_WEBHOOK_SECRET
      - type: logging

Each kind is a model of its entry's keys with a ``build()`` that makes the hook. The
webhook and logging entries are those hooks' own settings models plus the ``type`` tag,
so every default is written once, beside its hook. The ``langgraph`` kind builds
``LangGraphInterruptHook``, which lives in ``trustroute.integrations`` because it needs
LangGraph; router/ never imports integrations/, so the kind names its factory by dotted
path (``LANGGRAPH_HOOK``) and imports it on first use, the way a ``callable`` entry
names its function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer.callable_hook import CallableHook, import_target
from trustroute.router.handoff.transfer.dispatcher import TransferDispatcher
from trustroute.router.handoff.transfer.hook import hook_name
from trustroute.router.handoff.transfer.logging_hook import LoggingHook, LoggingSettings
from trustroute.router.handoff.transfer.webhook import WebhookHook, WebhookSettings

if TYPE_CHECKING:
    from trustroute.profiles.store import Store

LANGGRAPH_HOOK = "trustroute.integrations.langgraph:LangGraphInterruptHook"


class CallableHookSpec(BaseModel):
    """A Python function, by import path: ``target: mypackage.handoff:notify``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["callable"]
    target: str = Field(min_length=3)
    name: str | None = None

    def build(self) -> CallableHook:
        """The hook this entry describes."""
        return CallableHook(self.target, name=self.name)


class LoggingHookSpec(LoggingSettings):
    """One log line per hand-off."""

    type: Literal["logging"]

    def build(self) -> LoggingHook:
        """The hook this entry describes."""
        return LoggingHook(**self.model_dump(exclude={"type"}))


class WebhookHookSpec(WebhookSettings):
    """HTTP POST of the request as JSON, retried, optionally HMAC-signed."""

    type: Literal["webhook"]

    def build(self) -> WebhookHook:
        """The hook this entry describes."""
        return WebhookHook(**self.model_dump(exclude={"type"}))


class LangGraphHookSpec(BaseModel):
    """Pause the running LangGraph graph with ``interrupt()`` (needs the langgraph extra)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["langgraph"]
    name: str | None = None  # None: the hook's own default

    def build(self) -> Any:
        """The hook this entry describes (its factory imported now, by dotted path)."""
        return import_target(LANGGRAPH_HOOK)(**self.model_dump(exclude={"type"}, exclude_none=True))


HookSpec = Annotated[
    CallableHookSpec | LoggingHookSpec | WebhookHookSpec | LangGraphHookSpec,
    Field(discriminator="type"),
]


def build_dispatcher(
    hooks: Sequence[HookSpec], handoff: HandoffSection | None = None, store: Store | None = None
) -> TransferDispatcher:
    """A dispatcher over the configured hooks (pending requests go to ``store``)."""
    built = [spec.build() for spec in hooks]
    names = [hook_name(h) for h in built]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"hooks: names must be unique (set name:), repeated: {', '.join(dupes)}")
    return TransferDispatcher(built, store=store, settings=handoff)

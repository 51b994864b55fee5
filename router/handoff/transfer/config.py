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
so every default is written once, beside its hook.

The ``langgraph`` kind builds ``LangGraphInterruptHook``, which lives in integrations/
because it is LangGraph glue, and router/ never imports integrations/ (not even by
name). So the kind's factory is found the way Python finds plugins: the package declares
it as the entry point ``langgraph`` of the group ``trustroute.hook_kinds`` (pyproject.toml),
and ``build()`` loads it from the installed metadata on first use. A package of your own
can provide a factory the same way; the kind itself is still declared here, so a config
file is checked before anything is loaded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer.callable_hook import CallableHook, check_target
from trustroute.router.handoff.transfer.dispatcher import TransferDispatcher
from trustroute.router.handoff.transfer.hook import hook_name
from trustroute.router.handoff.transfer.logging_hook import LoggingHook, LoggingSettings
from trustroute.router.handoff.transfer.webhook import WebhookHook, WebhookSettings

HOOK_KINDS = "trustroute.hook_kinds"  # entry-point group: hook kinds built outside router/


class CallableHookSpec(BaseModel):
    """A Python function, by import path: ``target: mypackage.handoff:notify``.

    Imported when the hook is first used, not when the config is loaded; when
    ``sys.path`` cannot import it, the config file's folder is tried too.
    """

    model_config = ConfigDict(extra="forbid")

    type: Literal["callable"]
    target: Annotated[str, AfterValidator(check_target)]
    name: str | None = None

    def build(self, config_dir: Path | None = None) -> CallableHook:
        """The hook this entry describes (``config_dir``: the config file's folder)."""
        folders = [config_dir] if config_dir is not None else []
        return CallableHook(self.target, name=self.name, search_path=folders)


class LoggingHookSpec(LoggingSettings):
    """One log line per hand-off."""

    type: Literal["logging"]

    def build(self, config_dir: Path | None = None) -> LoggingHook:
        """The hook this entry describes."""
        return LoggingHook(**self.model_dump(exclude={"type"}))


class WebhookHookSpec(WebhookSettings):
    """HTTP POST of the request as JSON, retried, optionally HMAC-signed."""

    type: Literal["webhook"]

    def build(self, config_dir: Path | None = None) -> WebhookHook:
        """The hook this entry describes."""
        return WebhookHook(**self.model_dump(exclude={"type"}))


class LangGraphHookSpec(BaseModel):
    """Pause the running LangGraph graph with ``interrupt()`` (needs the langgraph extra)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["langgraph"]
    name: str | None = None  # None: the hook's own default

    def build(self, config_dir: Path | None = None) -> Any:
        """The hook this entry describes (its factory loaded now, from the entry point)."""
        found = entry_points(group=HOOK_KINDS, name=self.type)
        if not found:
            raise ValueError(
                f"hooks: no installed package provides the hook kind {self.type!r} (entry "
                f"point {self.type!r} in the group {HOOK_KINDS!r}); reinstall trustroute"
            )
        factory = next(iter(found)).load()
        return factory(**self.model_dump(exclude={"type"}, exclude_none=True))


HookSpec = Annotated[
    CallableHookSpec | LoggingHookSpec | WebhookHookSpec | LangGraphHookSpec,
    Field(discriminator="type"),
]


def build_dispatcher(
    hooks: Sequence[HookSpec],
    handoff: HandoffSection | None = None,
    source: Path | None = None,
) -> TransferDispatcher:
    """A dispatcher over the configured hooks (the router it is given to binds its store).

    ``source`` is the config file they were read from: callable hooks not importable from
    ``sys.path`` are looked for in its folder too.
    """
    config_dir = Path(source).resolve().parent if source is not None else None
    built = [spec.build(config_dir) for spec in hooks]
    dupes = sorted(n for n, count in Counter(map(hook_name, built)).items() if count > 1)
    if dupes:
        raise ValueError(f"hooks: names must be unique (set name:), repeated: {', '.join(dupes)}")
    return TransferDispatcher(built, settings=handoff)

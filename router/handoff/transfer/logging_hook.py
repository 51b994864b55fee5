"""A transfer hook that writes each request to a Python logger (the default fallback)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from trustroute.profiles.validation import refuse_bool
from trustroute.router.handoff.transfer.request import TransferRequest

_MAX_INPUT_CHARS = 200


class LoggingSettings(BaseModel):
    """A logging hook's settings: ``LoggingHook``'s keywords and a ``type: logging`` entry.

    ``level`` is a number or a level name (``INFO``, ``warning`` ...).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    logger: str = "trustroute.handoff"
    level: int = logging.WARNING
    include_input: bool = False
    name: str = "logging"

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return refuse_bool(value)
        level = logging.getLevelNamesMapping().get(value.strip().upper())
        if level is None:
            raise ValueError(f"unknown log level {value!r}")
        return level


class LoggingHook:
    """Logs one line per request: id, task type, confidence and reason.

    The task input is left out unless ``include_input`` (it may hold personal data), and
    is then cut to 200 characters. ``logger`` is a logger or its name; the other keywords
    are those of ``LoggingSettings``.
    """

    def __init__(self, logger: str | logging.Logger | None = None, **options: Any) -> None:
        given = logger if isinstance(logger, logging.Logger) else None
        if logger is not None:
            options["logger"] = given.name if given else logger
        self.settings = LoggingSettings(**options)
        self.logger = given or logging.getLogger(self.settings.logger)
        self.name = self.settings.name  # in logs and pending rows

    def __repr__(self) -> str:
        return f"LoggingHook({self.logger.name!r})"

    def __call__(self, request: TransferRequest) -> None:
        """Write the log line."""
        confidence = "n/a" if request.confidence is None else f"{request.confidence:.2f}"
        extra = ""
        if self.settings.include_input and request.input is not None:
            extra = f" input={str(request.input)[:_MAX_INPUT_CHARS]!r}"
        self.logger.log(
            self.settings.level,
            "hand-off %s (%s, task type %s, confidence %s): %s%s",
            request.request_id,
            request.source,
            request.task_type or "-",
            confidence,
            request.reason,
            extra,
        )

    async def acall(self, request: TransferRequest) -> None:
        """Logging does not block meaningfully; log on the loop."""
        self(request)

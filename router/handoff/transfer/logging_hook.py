"""A transfer hook that writes each request to a Python logger (the default fallback)."""

from __future__ import annotations

import logging

from trustroute.router.handoff.transfer.request import TransferRequest

_MAX_INPUT_CHARS = 200


class LoggingHook:
    """Logs one line per request: id, task type, confidence and reason.

    The task input is left out unless ``include_input`` (it may hold personal data), and
    is then cut to 200 characters.
    """

    def __init__(
        self,
        logger: str | logging.Logger = "trustroute.handoff",
        *,
        level: int | str = logging.WARNING,
        include_input: bool = False,
        name: str = "logging",
    ) -> None:
        self.logger = logger if isinstance(logger, logging.Logger) else logging.getLogger(logger)
        if isinstance(level, str):
            resolved = logging.getLevelName(level.upper())
            if not isinstance(resolved, int):
                raise ValueError(f"unknown log level {level!r}")
            level = resolved
        self.level = level
        self.include_input = include_input
        self.name = name

    def __repr__(self) -> str:
        return f"LoggingHook({self.logger.name!r})"

    def __call__(self, request: TransferRequest) -> None:
        """Write the log line."""
        confidence = "n/a" if request.confidence is None else f"{request.confidence:.2f}"
        extra = ""
        if self.include_input and request.input is not None:
            extra = f" input={str(request.input)[:_MAX_INPUT_CHARS]!r}"
        self.logger.log(
            self.level,
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

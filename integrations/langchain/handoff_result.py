"""What ``HandoffRunnable`` returns instead of an answer when it hands a task over."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, Field

from trustroute.router.handoff.transfer import TransferOutcome, TransferRequest


class HandoffResult(BaseModel):
    """What a HandoffRunnable returns instead of an answer when it hands over."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    message: str
    reason: str
    confidence: float
    request: TransferRequest
    documents: list[Document] = Field(default_factory=list)
    outcome: TransferOutcome | None = None
    human_response: Any = None

    @property
    def handed_off(self) -> bool:
        """Always True: lets callers test ``getattr(out, "handed_off", False)``."""
        return True

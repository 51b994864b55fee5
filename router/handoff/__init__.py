"""Hand-off to a person: retrieval confidence, its calibration, the messages shown, and
the transfer hooks (``handoff.transfer``) that deliver a request."""

from trustroute.router.handoff.confidence import ConfidenceResult, RetrievalConfidence
from trustroute.router.handoff.settings import RetrievalConfidenceConfig

__all__ = ["ConfidenceResult", "RetrievalConfidence", "RetrievalConfidenceConfig"]

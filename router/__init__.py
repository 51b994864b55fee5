"""Routing decisions: which agent takes a task, and how sure we are."""

from router.agents import AgentSpec
from router.decision import CandidateScore, RoutingDecision
from router.errors import (
    AgentAtCapacity,
    NoAgentAvailable,
    RouterError,
    UnknownAgent,
    UnknownStrategy,
)
from router.load import Lease
from router.router import AgentRouter

__all__ = [
    "AgentAtCapacity",
    "AgentRouter",
    "AgentSpec",
    "CandidateScore",
    "Lease",
    "NoAgentAvailable",
    "RouterError",
    "RoutingDecision",
    "UnknownAgent",
    "UnknownStrategy",
]

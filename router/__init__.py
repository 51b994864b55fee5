"""Routing decisions: which agent takes a task, and how sure we are."""

from trustroute.router.agents import AgentSpec
from trustroute.router.decision import CandidateScore, RoutingDecision
from trustroute.router.errors import (
    AgentAtCapacity,
    AgentRateLimited,
    CapacityTimeout,
    NoAgentAvailable,
    RouterError,
    UnknownAgent,
    UnknownStrategy,
)
from trustroute.router.load import Lease
from trustroute.router.router import AgentRouter

__all__ = [
    "AgentAtCapacity",
    "AgentRateLimited",
    "AgentRouter",
    "AgentSpec",
    "CandidateScore",
    "CapacityTimeout",
    "Lease",
    "NoAgentAvailable",
    "RouterError",
    "RoutingDecision",
    "UnknownAgent",
    "UnknownStrategy",
]

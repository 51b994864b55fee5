"""Routing strategies, one module each, behind the small interface in ``base``.

``make_strategy(name, **params)`` builds a registered strategy; third parties may
``register_strategy`` their own factory.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from trustroute.router.errors import UnknownStrategy
from trustroute.router.strategies.base import (
    AmendingStrategy,
    Arm,
    ArmScore,
    PreparingStrategy,
    StatelessStrategy,
    Strategy,
    StrategyContext,
)
from trustroute.router.strategies.confidence_weighted import ConfidenceWeighted
from trustroute.router.strategies.epsilon_greedy import EpsilonGreedy
from trustroute.router.strategies.knowledge_gradient import KnowledgeGradient
from trustroute.router.strategies.lower_bound import LowerBound
from trustroute.router.strategies.params import InvalidStrategyParams
from trustroute.router.strategies.random_choice import RandomChoice
from trustroute.router.strategies.thompson import ThompsonSampling

StrategyFactory = Callable[..., Strategy]

_REGISTRY: dict[str, StrategyFactory] = {
    ConfidenceWeighted.name: ConfidenceWeighted,
    EpsilonGreedy.name: EpsilonGreedy,
    KnowledgeGradient.name: KnowledgeGradient,
    LowerBound.name: LowerBound,
    RandomChoice.name: RandomChoice,
    ThompsonSampling.name: ThompsonSampling,
}

#: The knowledge-gradient index on pooled, discounted posteriors, exploring only as far
#: as the evidence still to come pays (see docs/learning.md).
DEFAULT_STRATEGY = KnowledgeGradient.name
#: The default before it: Thompson sampling on the same posteriors.
PREVIOUS_DEFAULT_STRATEGY = ThompsonSampling.name


def register_strategy(name: str, factory: StrategyFactory) -> None:
    """Make ``factory`` available under ``name`` (overrides an existing name)."""
    _REGISTRY[name] = factory


def available_strategies() -> list[str]:
    """Registered strategy names, sorted."""
    return sorted(_REGISTRY)


def make_strategy(name: str, **params: Any) -> Strategy:
    """Build the strategy registered as ``name`` with ``params``."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownStrategy(
            f"unknown strategy {name!r}; available: {', '.join(available_strategies())}"
        ) from None
    try:
        inspect.signature(factory).bind(**params)
    except TypeError as exc:  # only a mismatch with the signature is the caller's fault
        raise InvalidStrategyParams(f"bad parameters for strategy {name!r}: {exc}") from None
    except ValueError:  # no signature to check against: the factory checks its own
        pass
    return factory(**params)


__all__ = [
    "DEFAULT_STRATEGY",
    "PREVIOUS_DEFAULT_STRATEGY",
    "AmendingStrategy",
    "Arm",
    "ArmScore",
    "InvalidStrategyParams",
    "PreparingStrategy",
    "StatelessStrategy",
    "Strategy",
    "StrategyContext",
    "available_strategies",
    "make_strategy",
    "register_strategy",
]

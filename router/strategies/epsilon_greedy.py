"""``epsilon_greedy``: the posterior mean, except a random pick with probability epsilon.

A baseline for replays and benchmarks (the ε-greedy learner of Vowpal Wabbit's
``cb_explore_adf``, pooled like the default): it ranks by the same pooled, discounted
posterior mean as ``knowledge_gradient`` and ``thompson``, and with probability
``epsilon`` (default 0.05) routes uniformly at random instead.
"""

from __future__ import annotations

from pydantic import Field

from trustroute.router.strategies.base import ArmScore, StrategyContext
from trustroute.router.strategies.params import PosteriorParams
from trustroute.router.strategies.pooled_posterior import PooledPosterior, Posterior


class EpsilonParams(PosteriorParams):
    """The posterior's knobs, plus the share of random decisions."""

    epsilon: float = Field(default=0.05, ge=0, le=1)
    """Probability that a decision picks uniformly at random."""


class EpsilonGreedy(PooledPosterior):
    """Greedy on the pooled posterior mean; uniformly random with probability epsilon."""

    name = "epsilon_greedy"
    params_model = EpsilonParams

    random_reason = "epsilon: random"

    def random_share(self) -> float:
        """Epsilon (or the exploration floor, when that is larger)."""
        epsilon = self.params.epsilon if isinstance(self.params, EpsilonParams) else 0.0
        return max(epsilon, self.params.exploration_floor)

    def explore(self, post: Posterior, ctx: StrategyContext) -> list[ArmScore]:
        """Greedy: the posterior means."""
        return self.verdicts(post, post.mean, "posterior mean", "posterior_mean")

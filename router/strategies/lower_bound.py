"""``lower_bound``: exploit only, ranking by the Wilson lower bound of the posterior.

For production traffic that must not pay for exploration: the agent whose quality is
*surely* highest wins, so one lucky perfect run (bound 0.21) never beats ten runs at
0.80 (bound 0.49 before pooling). The bound is taken over the pooled posterior's mean
and its effective number of runs (prior pseudo-runs included). An optional
``exploration_floor`` still routes that fraction of decisions uniformly at random.
``thompson`` uses the same ranking when ``exploit_only`` is set on it or the router.
"""

from __future__ import annotations

from trustroute.router.strategies.base import StrategyContext
from trustroute.router.strategies.pooled_posterior import PooledPosterior


class LowerBound(PooledPosterior):
    """Rank by the lower confidence bound of pooled, discounted quality."""

    name = "lower_bound"

    def exploit(self, ctx: StrategyContext) -> bool:
        """Always: this strategy never samples."""
        return True

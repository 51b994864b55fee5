"""``thompson`` (the default before ``knowledge_gradient``): Thompson sampling on a
pooled, discounted Beta posterior.

Each decision draws one plausible quality per arm from its posterior (see
``pooled_posterior``) and picks the best draw net of the cost/latency penalty. Arms are
chosen in proportion to the probability that they are the best, so an untried agent is
tried early (its posterior is wide), a bad one stops being tried once the evidence
says so, and evidence that ages (``half_life_executions``) widens posteriors again so
a regressed agent is abandoned and a recovered one is re-explored. In exploit-only mode
(``exploit_only`` param, ``AgentRouter(exploit_only=True)`` or ``ctx.exploit_only``)
it ranks by the Wilson lower bound instead, like ``lower_bound``.

``success_probability`` is the posterior mean of the *success rate* (pooled the same
way as quality); the score itself is about *quality*.
"""

from __future__ import annotations

import numpy as np

from trustroute.router.strategies.base import ArmScore, StrategyContext
from trustroute.router.strategies.pooled_posterior import PooledPosterior, Posterior

MAX_BATCH = 64  # most draws taken at once from an unchanged posterior


class ThompsonSampling(PooledPosterior):
    """Sample each arm's quality from its posterior; the best draw wins."""

    name = "thompson"

    def explore(self, post: Posterior, ctx: StrategyContext) -> list[ArmScore]:
        """Thompson verdicts: one draw per arm from its posterior."""
        return self.verdicts(post, self.draw(post, ctx.rng), "Thompson draw", "sample")

    def draw(self, post: Posterior, rng: np.random.Generator) -> np.ndarray:
        """One Thompson draw per arm from the posterior.

        While no new outcome arrives the posterior is unchanged, so draws are taken in
        growing batches (1, 2, 4, ... 64): the same independent samples a draw per
        decision would give, at a fraction of numpy's per-call cost on a hot path of
        decisions without outcomes. The sequence is fixed by the seed either way.
        """
        if post.pending is None or post.next_draw >= len(post.pending):
            post.pending = rng.beta(post.alpha, post.beta, size=(post.batch, len(post.alpha)))
            post.next_draw = 0
            post.batch = min(2 * post.batch, MAX_BATCH)
        row = post.pending[post.next_draw]
        post.next_draw += 1
        return row

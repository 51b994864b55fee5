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

from trustroute.router.strategies.pooled_posterior import PooledPosterior


class ThompsonSampling(PooledPosterior):
    """Sample each arm's quality from its posterior; the best draw wins."""

    name = "thompson"

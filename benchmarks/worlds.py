"""Synthetic full-information outcome logs for the learning benchmarks.

*Leaderboard* worlds, shaped like public model leaderboards where a few agents are
strong and most are weak: each agent has an overall level drawn from Beta(0.7, 2.5)
(mean 0.22; about one agent in sixteen above 0.6), and its mean on each task type is that
level plus a type-specific deviation (sd 0.06, so agents are strongly correlated across
types), kept inside [0.01, 0.99]. Outcomes are Bernoulli draws of those means, for
every agent on every task (full information, so a policy can be replayed exactly).
Nothing here is fitted to any real log.
"""

from __future__ import annotations

import numpy as np

from trustroute.router.replay import OutcomeLog

LEVEL_SHAPE = (0.7, 2.5)  # Beta(a, b) of agents' overall levels: few strong, most weak
TYPE_SD = 0.06  # spread of an agent's mean on one task type around its level


def leaderboard_log(seed: int, agents: int, task_types: int, per_type: int) -> OutcomeLog:
    """A leaderboard world: ``agents`` x (``task_types`` x ``per_type``) outcomes."""
    rng = np.random.default_rng([seed, agents, task_types, per_type])
    level = rng.beta(*LEVEL_SHAPE, size=agents)
    means = np.clip(level[None, :] + rng.normal(0.0, TYPE_SD, (task_types, agents)),
                    0.01, 0.99)
    types = np.repeat(np.arange(task_types), per_type)
    quality = (rng.random((len(types), agents)) < means[types]).astype(float)
    return OutcomeLog(agents=tuple(f"agent-{i:02d}" for i in range(agents)),
                      tasks=tuple(f"task-{i}" for i in range(len(types))),
                      task_types=tuple(f"type-{t}" for t in types), quality=quality)

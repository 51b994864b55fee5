"""What a policy that knows the population prior, but not the agents, could reach.

Measured on the replay's own runs (``make_plans``: the same task orders the strategies
see), so the figures stand beside the strategies' in one table:

- **best overall agent**: the agent with the best overall level (mean over task types),
  known from the start, on every task. It knows the agents; what it misses is only the
  per-type deviations (and the luck in the oracle's per-type means).
- **ideal search**: a search that knows the population prior (``worlds.LEVEL_SHAPE``)
  and learns an agent *exactly* from its first task (a relaxation: real outcomes are
  Bernoulli draws, one of which says little). Agents are tried in a random order; it
  stops when the best level found is worth more, over the tasks left, than trying
  another agent: the optimal stopping rule for that relaxed problem, by backward
  induction over (tasks left, agents left, best level found) (Berry, Chen, Zame, Heath &
  Shepp, "Bandit problems with infinitely many arms", Annals of Statistics 1997, solve
  the same search with Bernoulli observations). Then either each task type's best tried
  agent (*per type*: the per-type means revealed too) or the tried agent with the best
  overall level (*then best overall*).

No policy that learns from outcomes can do better in expectation than the relaxation's
optimum; on one world a lucky policy may.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import stats

from benchmarks.worlds import LEVEL_SHAPE
from trustroute.router.replay.plan import RunPlan

GRID = 501  # levels 0, 0.002, ..., 1
#: What ``bounds`` reports, in the order a table shows it.
BOUNDS = ("best overall agent", "ideal search, per type", "ideal search, then best overall",
          "agents tried by the ideal search")


@lru_cache(maxsize=8)
def stop_table(steps: int, agents: int) -> np.ndarray:
    """``stop[h - 1, k, j]``: with ``h`` tasks left, ``k`` agents untried and best level
    ``j / (GRID - 1)`` found, stop searching (exploiting it for ``h`` tasks is worth at
    least trying one more agent, whose level is a draw from the population prior)."""
    level = np.linspace(0.0, 1.0, GRID)
    edges = np.concatenate([[0.0], (level[1:] + level[:-1]) / 2.0, [1.0]])
    weight = np.diff(stats.beta(*LEVEL_SHAPE).cdf(edges))  # P(a new level in cell j)
    below = np.cumsum(weight)
    fresh = LEVEL_SHAPE[0] / sum(LEVEL_SHAPE)  # what the tried agent earns on its task
    value = np.zeros((agents + 1, GRID))  # with h - 1 tasks left
    stop = np.ones((steps, agents + 1, GRID), dtype=bool)
    for h in range(1, steps + 1):
        exploit = h * level
        # E[value(h - 1, k - 1, max(best, new))]: keep the best, or take a better new one
        above = np.cumsum((weight * value[:-1])[:, ::-1], axis=1)[:, ::-1]
        above = np.concatenate([above[:, 1:], np.zeros((agents, 1))], axis=1)
        search = fresh + value[:-1] * below + above
        stop[h - 1, 1:] = exploit >= search
        value = np.concatenate([exploit[None], np.maximum(exploit, search)])
    return stop


def type_means(plan: RunPlan) -> tuple[list[str], np.ndarray]:
    """The plan's task types and each agent's mean on each (types x agents)."""
    types = sorted(set(plan.task_types))
    of = np.array([types.index(t) for t in plan.task_types])
    return types, np.stack([plan.expected[np.flatnonzero(of == i)[0]]
                            for i in range(len(types))])


def bounds(plan: RunPlan) -> dict[str, float]:
    """% of the per-task-type oracle of the three reference policies on one run, and
    how many agents the ideal search tried."""
    types, means = type_means(plan)
    of = np.array([types.index(t) for t in plan.task_types])
    steps, agents = plan.quality.shape
    level = means.mean(axis=0)
    oracle = float(np.sum(plan.oracle))
    rows = np.arange(steps)
    out = {"best overall agent": float(np.sum(plan.quality[:, np.argmax(level)]))}
    order = np.random.default_rng([plan.seed, plan.index, 1997]).permutation(agents)
    stop = stop_table(steps, agents)
    tried = 0
    for t in range(steps):
        best = float(level[order[:tried]].max()) if tried else 0.0
        j = min(round(best * (GRID - 1)), GRID - 1)
        if tried == agents or (tried and stop[steps - t - 1, agents - tried, j]):
            break
        tried += 1
    picked = order[:tried]
    per_type = picked[np.argmax(means[:, picked], axis=1)]
    overall = picked[np.argmax(level[picked])]
    search = float(np.sum(plan.quality[rows[:tried], picked]))
    out["ideal search, per type"] = search + float(
        np.sum(plan.quality[rows[tried:], per_type[of[tried:]]]))
    out["ideal search, then best overall"] = search + float(
        np.sum(plan.quality[tried:, overall]))
    return {**{name: 100.0 * value / oracle for name, value in out.items()},
            "agents tried by the ideal search": float(tried)}

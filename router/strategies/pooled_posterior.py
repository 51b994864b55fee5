"""PooledPosterior: the Beta posterior per arm that every posterior strategy shares.

For agent ``a`` on task type ``t`` (all sums discounted, see ``evidence``):

1. global mean ``g``: all evidence, with a uniform Beta(1, 1) prior;
2. type baseline ``mu_t``: type t's evidence shrunk toward ``g`` by
   ``type_prior_strength`` pseudo-runs;
3. agent effect ``b_a``: how much better than each type's baseline the agent did on
   every *other* type, shrunk toward 0 by ``agent_prior_strength`` pseudo-runs (the
   pair's own evidence is left out so it is not counted twice);
4. pooled prior: mean ``mu_t + b_a`` (clipped into (0, 1)), worth
   ``pooled_strength(evidence elsewhere, agent_prior_strength, prior_strength)``
   pseudo-runs, at most ``prior_strength``;
5. posterior Beta(alpha, beta) = prior + the pair's fractional evidence; with
   ``robust_weight`` the prior is a mixture of the pooled prior and a uniform Beta(1, 1)
   whose weights the pair's own evidence updates, moment-matched back to one Beta
   (``robust_beta_parameters``).

The same is done for the success rate (``success_probability``). Posteriors are cached
per (task type, arms) until the ledger changes, so a stream of decisions without new
outcomes only samples.

The subclasses (``knowledge_gradient``, ``thompson``, ``epsilon_greedy``,
``lower_bound``) differ in how a decision that does not exploit ranks the arms
(``explore``) and in when a decision exploits (``exploit``: ranks by the lower bound).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import WindowEntry
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.agents import AgentSpec
from trustroute.router.stats import wilson_lower_bound
from trustroute.router.strategies.base import Arm, ArmScore, Explanation, StrategyContext
from trustroute.router.strategies.change_monitor import ChangeMonitor, DetectedChange
from trustroute.router.strategies.evidence import EvidenceLedger
from trustroute.router.strategies.params import PosteriorParams
from trustroute.router.strategies.posterior import (
    beta_mean,
    beta_parameters,
    beta_sd,
    clip_mean,
    pooled_strength,
    robust_beta_parameters,
)

_CACHE_LIMIT = 1024  # cached posteriors (task type x arm set) before the cache is dropped
_TIME_REFRESH_SECONDS = 60.0  # with wall-time discounting, recompute at most this stale


@dataclass(slots=True)
class Posterior:
    """Posterior of every arm of one decision, aligned with the arms.

    Only what every decision needs is computed up front (the Beta parameters, the
    success means); the lower bound and the per-arm explanation columns are derived
    on first read, since most decisions sample and are never read by a person.
    """

    version: int  # the ledger's version it was computed from
    computed_at: float
    alpha: np.ndarray  # quality posterior
    beta: np.ndarray
    z: float  # width of the lower bound
    success: list[float]  # posterior mean of the success rate
    penalties: list[float] | None  # lambda_cost x cost + lambda_latency x latency; None: all 0
    columns: dict[str, np.ndarray]  # prior_mean, prior_strength, evidence, penalty per arm
    pending: np.ndarray | None = None  # Thompson draws taken ahead (batch, arms): thompson
    next_draw: int = 0
    batch: int = 1
    _lower_bound: np.ndarray | None = None
    _components: list[dict[str, float]] | None = None
    derived: dict[str, np.ndarray] = field(default_factory=dict)
    """What a strategy derives from this posterior, kept while it is current."""
    slots: np.ndarray | None = None  # the arms' ledger slots

    @property
    def mean(self) -> np.ndarray:
        """Posterior mean quality per arm."""
        return beta_mean(self.alpha, self.beta)

    @property
    def lower_bound(self) -> np.ndarray:
        """Wilson lower bound of the mean over the posterior's effective runs."""
        if self._lower_bound is None:
            self._lower_bound = wilson_lower_bound(self.mean, self.alpha + self.beta, self.z)
        return self._lower_bound

    @property
    def components(self) -> list[dict[str, float]]:
        """Per arm: the numbers behind its score (built on first read)."""
        if self._components is None:
            columns = {"posterior_mean": self.mean,
                       "posterior_sd": beta_sd(self.alpha, self.beta),
                       "evidence": self.columns["evidence"],
                       "prior_mean": self.columns["prior_mean"],
                       "prior_strength": self.columns["prior_strength"],
                       "success_probability": np.asarray(self.success),
                       "lower_bound": self.lower_bound, "penalty": self.columns["penalty"]}
            rows = zip(*(values.tolist() for values in columns.values()), strict=True)
            self._components = [dict(zip(columns, row, strict=True)) for row in rows]
        return self._components


@dataclass(slots=True)
class CacheEntry:
    """What one (task type, arm set) keeps between decisions."""

    agents: tuple[AgentSpec, ...]  # the key's agent specs, kept alive so ids stay unique
    idx: np.ndarray  # the arms' ledger slots
    posterior: Posterior | None = None
    others: int = -1  # the ledger's others_version the parts below were computed at
    known: np.ndarray | None = None  # evidence elsewhere + agent_prior_strength
    surplus: np.ndarray | None = None  # (2, k) evidence elsewhere minus its expectation
    strength: np.ndarray | None = None  # pooled prior strength


class PooledPosterior:
    """Keeps the evidence ledger and turns it into a posterior per arm."""

    name = "pooled_posterior"
    params_model: type[PosteriorParams] = PosteriorParams  # subclasses may add knobs

    def __init__(self, **params: Any) -> None:
        self.params = self.params_model.parse(self.name, params)
        p = self.params
        half_life_seconds = None if p.half_life_days is None else p.half_life_days * 86_400.0
        self.ledger = EvidenceLedger(p.half_life_executions, half_life_seconds,
                                     p.type_prior_strength)
        self.monitor = (ChangeMonitor(p.change_window, p.change_delta)
                        if p.change_detection else None)
        self._cache: dict[tuple[str, tuple[int, ...]], CacheEntry] = {}
        # per task type, the cache key of the arm set decided over since the last prepare
        self._last: dict[str, tuple[str, tuple[int, ...]]] = {}

    # -- life cycle ------------------------------------------------------------------
    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Fold one committed record into the ledger (and the change monitor)."""
        entry = WindowEntry(record.timestamp.timestamp(), record.effective_quality,
                            record.success, seq)
        self.ledger.add(record.agent_id, record.task_type, entry)
        if self.monitor is not None:
            change = self.monitor.add(record.agent_id, record.task_type, entry)
            if change is not None:
                self._forget(change, book.window_size)

    def amend(self, agent_id: str, task_type: str, old: WindowEntry | None,
              new: WindowEntry | None, book: ProfileBook) -> None:
        """One record's quality evidence changed (feedback; a quality of None: none):
        its evidence in the ledger is replaced at its place, and the change monitor sees
        the verdict (a regression revealed by late verdicts is noticed)."""
        self.ledger.amend(agent_id, task_type, old, new)
        if self.monitor is not None:
            change = self.monitor.amend(agent_id, task_type, old, new)
            if change is not None:
                self._forget(change, book.window_size)

    def reset(self, book: ProfileBook) -> None:
        """Rebuild the ledger and change monitor from a freshly loaded book."""
        self.ledger.rebuild(book)
        self._cache.clear()
        if self.monitor is not None:
            for change in self.monitor.rebuild(book):
                self._forget(change, book.window_size)

    def _forget(self, change: DetectedChange, window: int) -> None:
        """Drop the agent's evidence from before ``change`` on every task type.

        What stays is the agent's outcomes since the change (``change.kept``), at most
        ``window`` of each type: what the profile window holds after the change.
        """
        for task_type in self.ledger.task_types_of(change.agent_id):
            kept = change.kept.get(task_type, ())[-window:]
            self.ledger.replace_pair(change.agent_id, task_type, kept)

    # -- the posterior ----------------------------------------------------------------
    def posterior(self, arms: Sequence[Arm], ctx: StrategyContext) -> Posterior:
        """The (cached) posterior of ``arms`` for ``ctx.task_type``.

        Cached per task type and arm set (by the identity of the agent specs, which the
        cache entry keeps alive, so a changed spec, e.g. a new cost, is a new key) until
        the ledger changes, or for at most a minute under wall-time discounting.
        """
        agents = [arm.agent for arm in arms]
        key = (ctx.task_type, tuple(map(id, agents)))
        now = ctx.now.timestamp()
        entry = self._cache.get(key)
        if entry is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            idx = self.ledger.indices([arm.agent_id for arm in arms])
            entry = self._cache[key] = CacheEntry(tuple(agents), idx)
        self._last[ctx.task_type] = key
        post = entry.posterior
        if post is not None and post.version == self.ledger.version and (
                self.params.half_life_days is None
                or 0.0 <= now - post.computed_at < _TIME_REFRESH_SECONDS):
            return post
        entry.posterior = post = self._compute(entry, ctx.task_type, now, ctx.book)
        return post

    def prepare(self, task_types: Iterable[str], book: ProfileBook, now: float) -> None:
        """Bring up to date, now that outcomes of ``task_types`` were folded, the
        posterior of the arm set each was last decided over, so the next decision finds
        it ready (the work moves from ``select`` to the fold of a record). Once per
        decision: records with no decision between them leave it to the next ``select``,
        so a stream of records costs no more than before. Under wall-time discounting the
        posterior depends on the moment it is read: left to ``select``."""
        if self.params.half_life_days is not None:
            return
        for task_type in task_types:
            entry = self._cache.get(self._last.pop(task_type, ("", ())))
            if entry is not None and (entry.posterior is None
                                      or entry.posterior.version != self.ledger.version):
                entry.posterior = self._compute(entry, task_type, now, book)
                self.derive(entry.posterior, task_type)

    def derive(self, post: Posterior, task_type: str) -> None:
        """Fill ``post.derived`` with what this strategy derives from a posterior
        (nothing here; ``knowledge_gradient`` keeps its gains)."""

    def _compute(self, entry: CacheEntry, task_type: str, now: float,
                 book: ProfileBook) -> Posterior:
        """Quality and success posteriors of the entry's arms, updated incrementally.

        The part of the pooled prior that rests on the agents' evidence on *other* task
        types is kept while only this type's evidence changes (the usual case: a record
        of this type between two of its decisions); what remains is a few array
        operations over the pair sums (O(arms), no per-arm Python work).
        """
        p = self.params
        ledger = self.ledger
        pair, baseline = ledger.pair_view(task_type, entry.idx, now)
        vague_mean: np.ndarray | float = 0.5
        vague_strength: float = 2.0
        if p.pooling:
            shrink = p.agent_prior_strength
            others = ledger.others_version(task_type)
            if entry.others != others or ledger.half_life_seconds is not None:
                elsewhere, expected = ledger.elsewhere_view(task_type, entry.idx, now)
                entry.known = elsewhere[2] + shrink
                entry.surplus = elsewhere[:2] - expected
                entry.strength = pooled_strength(elsewhere[2], shrink, p.prior_strength)
                entry.others = others
            assert entry.known is not None and entry.surplus is not None \
                and entry.strength is not None
            typical = (ledger.typical_effect(shrink) if p.population_prior
                       else np.zeros(2))
            effect = (entry.surplus + shrink * typical[:, None]) / entry.known
            prior_mean = clip_mean(baseline[:, None] + effect)
            prior_strength = entry.strength
            if p.robust_component == "population":  # a newcomer's prior on this type
                vague_mean = clip_mean(baseline[:, None] + typical[:, None])
                vague_strength = float(pooled_strength(0.0, shrink, p.prior_strength))
        else:
            prior_mean = np.full((2, len(entry.agents)), 0.5)
            prior_strength = np.full(len(entry.agents), 2.0)
        if p.robust_weight is not None and p.robust_weight < 1.0 and p.pooling:
            alpha, beta, _ = robust_beta_parameters(prior_mean, prior_strength, pair[:2],
                                                    pair[2], p.robust_weight, vague_mean,
                                                    vague_strength)
        else:
            alpha, beta = beta_parameters(prior_mean, prior_strength, pair[:2], pair[2])
        np.maximum(alpha, 1e-9, out=alpha)
        np.maximum(beta, 1e-9, out=beta)
        priced = bool(p.lambda_cost or p.lambda_latency)
        penalty = (self._penalty(entry.agents, task_type, book) if priced
                   else np.zeros(len(entry.agents)))
        return Posterior(
            version=ledger.version, computed_at=now, alpha=alpha[0], beta=beta[0],
            z=p.z, success=(alpha[1] / (alpha[1] + beta[1])).tolist(),
            penalties=penalty.tolist() if priced and penalty.any() else None,
            columns={"evidence": pair[2], "prior_mean": prior_mean[0],
                     "prior_strength": prior_strength, "penalty": penalty}, slots=entry.idx)

    def _penalty(self, agents: Sequence[AgentSpec], task_type: str, book: ProfileBook
                 ) -> np.ndarray:
        """``lambda_cost x cost + lambda_latency x latency_s`` per arm (0 by default).

        Cost: the pair's recorded mean, else the agent's across task types, else the
        config's ``cost_per_call``, else 0. Latency: the pair's mean, else the agent's.
        """
        p = self.params
        out = np.zeros(len(agents))
        if not (p.lambda_cost or p.lambda_latency):
            return out
        for i, spec in enumerate(agents):
            # the agent's states on every task type: the book holds its totals
            agent = [s for t in self.ledger.task_types_of(spec.id)
                     if (s := book.get(spec.id, t)) is not None]
            state = book.get(spec.id, task_type)
            if state is not None and state.cost_count:
                cost = state.cost_sum / state.cost_count
            elif cost_count := sum(s.cost_count for s in agent):
                cost = sum(s.cost_sum for s in agent) / cost_count
            else:
                cost = spec.cost_per_call or 0.0
            if state is not None and state.executions_total:
                latency_ms = state.latency_sum_ms / state.executions_total
            elif runs := sum(s.executions_total for s in agent):
                latency_ms = sum(s.latency_sum_ms for s in agent) / runs
            else:
                latency_ms = 0.0
            out[i] = p.lambda_cost * cost + p.lambda_latency * latency_ms / 1000.0
        return out

    # -- ranking ----------------------------------------------------------------------
    def exploit(self, ctx: StrategyContext) -> bool:
        """True when this decision ranks by the lower bound instead of sampling."""
        return self.params.exploit_only or ctx.exploit_only

    #: The reason a random pick gives.
    random_reason = "exploration floor: random"

    def random_share(self) -> float:
        """Probability that a decision is a uniformly random pick."""
        return self.params.exploration_floor

    def explore(self, post: Posterior, ctx: StrategyContext) -> list[ArmScore]:
        """The verdicts of a decision that does not exploit: each strategy's own (a
        Thompson draw, the knowledge-gradient index, ε-greedy's mean)."""
        raise NotImplementedError(f"{type(self).__name__} does not explore")

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        """``explore`` verdicts, lower-bound ones when ``exploit``, or a uniformly random
        order with probability ``random_share``."""
        post = self.posterior(arms, ctx)
        share = self.random_share()
        if share and float(ctx.rng.random()) < share:
            order = ctx.rng.random(len(post.alpha))
            return self.verdicts(post, order, self.random_reason, "random_order")
        if self.exploit(ctx):
            return self.verdicts(post, post.lower_bound, "lower bound", "lower_bound")
        return self.explore(post, ctx)

    @staticmethod
    def verdicts(post: Posterior, values: np.ndarray, label: str,
                 component: str) -> list[ArmScore]:
        """One ArmScore per arm: ``values - penalty`` explained by ``label``.

        ``values`` are on the quality scale; ``component`` names them in the components
        (``sample``, ``lower_bound`` or ``random_order``).
        """
        drawn = values.tolist()
        scores = drawn if post.penalties is None else \
            [value - penalty for value, penalty in zip(drawn, post.penalties, strict=True)]

        def explain(i: int) -> Explanation:
            c = post.components[i]
            # evidence is the recency-weighted count of runs: "effective", not whole runs
            reason = (f"{label} {drawn[i]:.2f}; mean {c['posterior_mean']:.2f} ± "
                      f"{c['posterior_sd']:.2f} over {c['evidence']:.1f} effective runs "
                      f"(pooled prior {c['prior_mean']:.2f} x {c['prior_strength']:.1f})")
            if post.penalties is not None:  # every arm names the penalty, zero or not
                reason += f"; cost/latency penalty {post.penalties[i]:.3f}"
            return reason, {**post.components[i], component: drawn[i], "objective": scores[i]}

        return [ArmScore(score, success_probability=post.success[i], explain=explain, key=i)
                for i, score in enumerate(scores)]

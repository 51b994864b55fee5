"""PooledPosterior: the Beta posterior per arm that Thompson and lower-bound share.

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
5. posterior Beta(alpha, beta) = prior + the pair's fractional evidence.

The same is done for the success rate (``success_probability``). Posteriors are cached
per (task type, arms) until the ledger changes, so a stream of decisions without new
outcomes only samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileState
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.explanation import Deferred
from trustroute.router.stats import wilson_lower_bound
from trustroute.router.strategies.base import Arm, ArmScore, StrategyContext
from trustroute.router.strategies.batch_book import clocks_as_of_each, states_as_of
from trustroute.router.strategies.change_monitor import ChangeMonitor, DetectedChange
from trustroute.router.strategies.evidence import EvidenceLedger
from trustroute.router.strategies.params import PosteriorParams
from trustroute.router.strategies.posterior import (
    beta_mean,
    beta_parameters,
    beta_sd,
    clip_mean,
    pooled_strength,
)

_CACHE_LIMIT = 1024  # cached posteriors (task type x arm set) before the cache is dropped
_TIME_REFRESH_SECONDS = 60.0  # with wall-time discounting, recompute at most this stale
_MAX_BATCH = 64  # most Thompson draws taken at once from an unchanged posterior


@dataclass(slots=True)
class Posterior:
    """Posterior of every arm of one decision, as arrays aligned with the arms."""

    version: int
    computed_at: float
    alpha: np.ndarray  # quality posterior
    beta: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    success: np.ndarray  # posterior mean of the success rate
    prior_mean: np.ndarray
    prior_strength: np.ndarray
    evidence: np.ndarray  # discounted runs of the pair itself
    lower_bound: np.ndarray
    penalty: np.ndarray  # lambda_cost x cost + lambda_latency x latency
    success_list: list[float] = field(default_factory=list)  # ``success`` as floats
    penalties: list[float] | None = None  # ``penalty`` as floats; None when all zero
    explained: list[str] = field(default_factory=list)  # per-arm reason, built lazily
    components: list[dict[str, float]] = field(default_factory=list)
    pending: np.ndarray | None = None  # pre-drawn Thompson samples (batch, arms)
    next_draw: int = 0
    batch: int = 1


class PooledPosterior:
    """Keeps the evidence ledger and turns it into a posterior per arm."""

    name = "pooled_posterior"

    def __init__(self, **params: Any) -> None:
        self.params = PosteriorParams.parse(self.name, params)
        p = self.params
        self.ledger = EvidenceLedger(p.half_life_executions, p.half_life_seconds,
                                     p.type_prior_strength)
        self.monitor = (ChangeMonitor(p.change_window, p.change_delta)
                        if p.change_detection else None)
        self._cache: dict[tuple[str, tuple[int, ...]], tuple[tuple[Any, ...], Posterior]] = {}
        # per agent: [cost sum, cost count, latency sum ms, runs] across task types
        self._usage: dict[str, list[float]] = {}

    # -- life cycle ------------------------------------------------------------------
    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Fold one committed record into the ledger."""
        quality, stamp = record.effective_quality, record.timestamp.timestamp()
        self.ledger.add(record.agent_id, record.task_type, quality, record.success, seq,
                        book.clock(record.task_type), stamp)
        if self.monitor is not None:
            change = self.monitor.add(record.agent_id, record.task_type, seq, quality, stamp,
                                      record.success)
            if change is not None:
                self._forget(change, book.for_agent(record.agent_id))
        self._add_usage((record,))

    def observe_many(self, committed: Sequence[tuple[ExecutionRecord, int]],
                     book: ProfileBook) -> None:
        """Fold committed records (already applied to ``book``, in order) in at once.

        Learns what ``observe`` after each record would, up to float rounding, at a
        fraction of the cost: each record's clock is its type's running maximum seq;
        the change monitor runs over the batch first to find the records at which a
        change fires; the ledger folds the records between them in array passes, and
        each change forgets, as of its own record, the agent's evidence before it
        (later records of the batch are folded after the forgetting).
        """
        if not committed:
            return
        if len(committed) == 1:  # one record: nothing to gain, and cheaper
            record, seq = committed[0]
            self.observe(record, seq, book)
            return
        records = [record for record, _ in committed]
        n = len(records)
        agents = [r.agent_id for r in records]
        types = [r.task_type for r in records]
        quality = np.fromiter((r.effective_quality for r in records), float, n)
        success = np.fromiter((r.success for r in records), bool, n)
        seqs = np.fromiter((seq for _, seq in committed), np.int64, n)
        stamps = np.fromiter((r.timestamp.timestamp() for r in records), float, n)
        clocks = clocks_as_of_each(types, seqs, self.ledger.clock, book)
        changes = ([] if self.monitor is None else
                   self.monitor.add_many(agents, types, seqs, quality, stamps, success))
        start = 0
        for end, change in [*((at + 1, change) for at, change in changes), (n, None)]:
            part = slice(start, end)
            self.ledger.add_many(agents[part], types[part], quality[part], success[part],
                                 seqs[part], clocks[part], stamps[part])
            if change is not None:
                self._forget(change, states_as_of(change.agent_id, committed, end, book))
            start = end
        self._add_usage(records)

    def _add_usage(self, records: Sequence[ExecutionRecord]) -> None:
        """Per agent: cost sum and count, latency sum and runs, across task types."""
        usage_of = self._usage
        for record in records:
            usage = usage_of.get(record.agent_id)
            if usage is None:
                usage = usage_of[record.agent_id] = [0.0, 0.0, 0.0, 0.0]
            if record.cost is not None:
                usage[0] += record.cost
                usage[1] += 1
            usage[2] += record.latency_ms
            usage[3] += 1

    def reset(self, book: ProfileBook) -> None:
        """Rebuild the ledger from a freshly loaded book."""
        self.ledger.rebuild(book)
        self._cache.clear()
        if self.monitor is not None:
            for change in self.monitor.rebuild(book):
                self._forget_window(change, book)
        self._usage = {}
        for state in book:
            usage = self._usage.setdefault(state.agent_id, [0.0, 0.0, 0.0, 0.0])
            usage[0] += state.cost_sum
            usage[1] += state.cost_count
            usage[2] += state.latency_sum_ms
            usage[3] += state.executions_total

    def _forget(self, change: DetectedChange, states: Sequence[ProfileState]) -> None:
        """Drop the agent's evidence from before ``change`` on each of its ``states``.

        What stays is the agent's outcomes since the change (``change.kept``), at most a
        window of each type: what the window holds after the change, in arrival order.
        """
        for state in states:
            kept = change.kept.get(state.task_type, ())
            limit = state.window.maxlen
            if limit is not None and len(kept) > limit:
                kept = kept[-limit:]
            self.ledger.replace_pair(change.agent_id, state.task_type, kept)

    def _forget_window(self, change: DetectedChange, book: ProfileBook) -> None:
        """``_forget`` on a freshly loaded book: keep window entries from the change on
        (its history was merged from the windows by time, so seqs are the reference)."""
        for state in book.for_agent(change.agent_id):
            start = change.keep_from.get(state.task_type)
            kept = [] if start is None else [e for e in state.window if e.seq >= start]
            self.ledger.replace_pair(change.agent_id, state.task_type, kept)

    def exploit(self, ctx: StrategyContext) -> bool:
        """True when this decision ranks by the lower bound instead of sampling."""
        return self.params.exploit_only or ctx.exploit_only

    # -- the posterior ----------------------------------------------------------------
    def posterior(self, arms: Sequence[Arm], ctx: StrategyContext) -> Posterior:
        """The (cached) posterior of ``arms`` for ``ctx.task_type``.

        Cached per task type and arm set (by the identity of the agent specs, which the
        cache entry keeps alive, so a changed spec, e.g. a new cost, is a new key) until
        the ledger changes, or for at most a minute under wall-time discounting.
        """
        agents = [arm.agent for arm in arms]
        key = (ctx.task_type, tuple(map(id, agents)))
        cached = self._cache.get(key)
        if cached is not None:
            post = cached[1]
            if post.version == self.ledger.version and (
                    self.params.half_life_days is None
                    or 0.0 <= ctx.now.timestamp() - post.computed_at < _TIME_REFRESH_SECONDS):
                return post
        ids = tuple(agent.id for agent in agents)
        post = self._compute(arms, ids, ctx.task_type, ctx.now.timestamp())
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = (tuple(agents), post)
        return post

    def _compute(self, arms: Sequence[Arm], ids: tuple[str, ...], task_type: str,
                 now: float) -> Posterior:
        p = self.params
        view = self.ledger.view(task_type, ids, now)
        pair, elsewhere = view.pair, view.elsewhere
        k = len(ids)
        if p.pooling:
            shrink = p.agent_prior_strength
            typical = (self.ledger.typical_effect(shrink) if p.population_prior
                       else np.zeros(2))
            known = elsewhere[2] + shrink
            effect = (elsewhere[:2] - view.expected + shrink * typical[:, None]) / known
            prior_mean = clip_mean(view.baseline[:, None] + effect)
            prior_strength = pooled_strength(elsewhere[2], shrink, p.prior_strength)
        else:
            prior_mean = np.full((2, k), 0.5)
            prior_strength = np.full(k, 2.0)
        alpha, beta = beta_parameters(prior_mean, prior_strength, pair[:2], pair[2])
        alpha = np.maximum(alpha, 1e-9)
        beta = np.maximum(beta, 1e-9)
        mean = beta_mean(alpha, beta)
        qa, qb = alpha[0], beta[0]
        penalty = self._penalty(arms)
        return Posterior(
            version=self.ledger.version, computed_at=now, alpha=qa, beta=qb,
            mean=mean[0], sd=beta_sd(qa, qb), success=mean[1], prior_mean=prior_mean[0],
            prior_strength=prior_strength, evidence=pair[2],
            lower_bound=wilson_lower_bound(mean[0], qa + qb, p.z),
            penalty=penalty, success_list=mean[1].tolist(),
            penalties=penalty.tolist() if penalty.any() else None)

    def _penalty(self, arms: Sequence[Arm]) -> np.ndarray:
        """``lambda_cost x cost + lambda_latency x latency_s`` per arm (0 by default).

        Cost: the pair's recorded mean, else the agent's across task types, else the
        config's ``cost_per_call``, else 0. Latency: the pair's mean, else the agent's.
        """
        p = self.params
        out = np.zeros(len(arms))
        if not (p.lambda_cost or p.lambda_latency):
            return out
        for i, arm in enumerate(arms):
            usage = self._usage.get(arm.agent_id, [0.0, 0.0, 0.0, 0.0])
            state = arm.state
            if state is not None and state.cost_count:
                cost = state.cost_sum / state.cost_count
            elif usage[1]:
                cost = usage[0] / usage[1]
            else:
                cost = arm.agent.cost_per_call or 0.0
            if state is not None and state.executions_total:
                latency_ms = state.latency_sum_ms / state.executions_total
            elif usage[3]:
                latency_ms = usage[2] / usage[3]
            else:
                latency_ms = 0.0
            out[i] = p.lambda_cost * cost + p.lambda_latency * latency_ms / 1000.0
        return out

    @staticmethod
    def explain(post: Posterior) -> None:
        """Fill the per-arm reasons and components that do not depend on a draw.

        Built into local lists and published at once (``explained`` last, it is the
        flag), so a reader on another thread never sees a half-filled list.
        """
        if post.explained:
            return
        reasons, components = [], []
        columns = zip(post.mean.tolist(), post.sd.tolist(), post.evidence.tolist(),
                      post.prior_mean.tolist(), post.prior_strength.tolist(),
                      post.success.tolist(), post.lower_bound.tolist(),
                      post.penalty.tolist(), strict=True)
        for mean, sd, n, prior, strength, success, bound, penalty in columns:
            reasons.append(f"mean {mean:.2f} ± {sd:.2f} over {n:.1f} runs "
                           f"(pooled prior {prior:.2f} x {strength:.1f})")
            components.append({
                "posterior_mean": mean, "posterior_sd": sd, "evidence": n,
                "prior_mean": prior, "prior_strength": strength,
                "success_probability": success, "lower_bound": bound, "penalty": penalty,
            })
        post.components = components
        post.explained = reasons

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
            post.batch = min(2 * post.batch, _MAX_BATCH)
        row = post.pending[post.next_draw]
        post.next_draw += 1
        return row

    # -- verdicts shared by the ranking strategies --------------------------------------
    def floor_draw(self, ctx: StrategyContext) -> bool:
        """True when the exploration floor turns this decision into a uniform pick."""
        floor = self.params.exploration_floor
        return bool(floor) and float(ctx.rng.random()) < floor

    def verdicts(self, post: Posterior, values: np.ndarray, label: str,
                 component: str) -> list[ArmScore]:
        """One ArmScore per arm: ``values - penalty`` explained by ``label``.

        ``values`` lie in [0, 1]; ``component`` names them in the components
        (``sample``, ``lower_bound`` or ``random_order``). Reasons and components are
        formatted only when read (``VerdictExplainer``): most decisions are never read.
        """
        drawn = values.tolist()
        success = post.success_list
        explainer = VerdictExplainer(post, drawn, label, component)
        deferred = ArmScore.deferred
        penalty = post.penalties
        if penalty is not None:
            return [deferred(value - penalty[i], success[i], explainer, i)
                    for i, value in enumerate(drawn)]
        return [deferred(value, success[i], explainer, i) for i, value in enumerate(drawn)]


class VerdictExplainer(Deferred):
    """The reason and components of one decision's verdicts, built per arm on read."""

    __slots__ = ("component", "label", "post", "values")

    def __init__(self, post: Posterior, values: list[float], label: str,
                 component: str) -> None:
        self.post, self.values, self.label, self.component = post, values, label, component

    def explain(self, key: Any) -> tuple[str, dict[str, float]]:
        """Arm ``key``'s reason and components (the value, its penalty, the posterior)."""
        post, i = self.post, int(key)
        PooledPosterior.explain(post)
        value = self.values[i]
        if post.penalties is not None:  # every arm's reason names the penalty, zero or not
            penalty = post.penalties[i]
            score = value - penalty
            reason = (f"{self.label} {value:.2f}; {post.explained[i]}; "
                      f"cost/latency penalty {penalty:.3f}")
        else:  # values lie in [0, 1]: format by table lookup
            score = value
            reason = f"{self.label} {_TWO_DECIMALS[int(value * 100.0 + 0.5)]}; {post.explained[i]}"
        return reason, {**post.components[i], self.component: value, "objective": score}


_TWO_DECIMALS = [f"{k / 100:.2f}" for k in range(101)]  # formatting floats is slow

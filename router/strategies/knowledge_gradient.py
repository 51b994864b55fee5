"""``knowledge_gradient`` (the default): explore only as far as the evidence still to come pays.

Thompson sampling explores as if the stream never ended and every outcome were judged.
Routing is not like that: a task type sees perhaps a few hundred tasks, often across
dozens of agents, and only some outcomes are ever judged. Exploring an agent pays only
if what it teaches is used often enough afterwards. This strategy weighs exactly that
(the online knowledge gradient of Ryzhov, Powell & Frazier, Operations Research 2012):

    index(a) = mean(a) + R x KG(a)

- ``mean(a)``: the pooled posterior mean (``pooled_posterior``): what choosing ``a``
  is expected to earn now;
- ``KG(a)``: how much one more judged outcome of ``a`` is expected to raise the best
  posterior mean of the task type, i.e. ``E[max(new mean of a, best other)] -
  max(mean of a, best other)`` over the two outcomes of the Beta posterior;
- ``R``: the judged outcomes of the task type still to come that such a lesson will
  serve: the *budget*. Evidence halves every ``half_life_executions``, so a lesson
  serves about ``half_life / ln 2`` executions (the mean life of a discounted run),
  fewer when the task type is known to end sooner (``horizon_executions``), times the
  share of executions that get judged (``feedback_rate``, else estimated as judged
  outcomes per decision of the type);
- the lesson's *reach*: an outcome teaches about the agent as a whole, and moves its
  pooled prior on every other task type as far as that prior weighs in its posterior
  there (``EvidenceLedger.prior_shares``); the gain is multiplied by one plus those
  shares, so an agent nobody has tried is valued for what it would teach everywhere.

With no more candidates than ``sqrt(R)`` (all affordable), the gain is also looked at
``ceil(sqrt(R))`` outcomes ahead, per outcome (``knowledge_gradient_m``: KG(*)), so an
untried agent that one outcome cannot lift past a known leader is still tried.

With many agents and a small budget, an agent whose pooled prior leaves little chance
of beating the best gets no trial at all (it would cost more than it could teach), which
is the many-armed regime's lesson (Bayati et al., NeurIPS 2020: explore a subsample,
greedily); the population prior (the typical agent) says how likely a newcomer is to be
good. With sparse or late labels, the budget shrinks and the index turns greedy, where
Thompson sampling would keep exploring on evidence that will never come. Runs awaiting a
verdict count as outcomes on their way (each times the judged share): the gain of an
arm is taken on its posterior as it will be once they arrive, the mean kept and the
uncertainty shrunk (the hallucinated observations of GP-BUCB, Desautels, Krause &
Burdick, JMLR 2014), so a stream of decisions waiting for verdicts tries an arm a few
times instead of sending it every task until the first verdict comes back.

Exploit-only mode and ``exploration_floor`` work as in ``thompson``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from pydantic import Field

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import WindowEntry
from trustroute.profiles.records import ExecutionRecord
from trustroute.router.strategies.base import Arm, ArmScore, StrategyContext
from trustroute.router.strategies.params import PosteriorParams
from trustroute.router.strategies.pooled_posterior import PooledPosterior, Posterior


class BudgetParams(PosteriorParams):
    """The posterior's knobs, plus what bounds the evidence still to come."""

    horizon_executions: float | None = Field(default=None, gt=0)
    """Executions a task type will see in all (None: unknown, unbounded)."""
    feedback_rate: float | None = Field(default=None, gt=0, le=1)
    """Share of executions that get judged (None: estimated per task type)."""


def best_other(mean: np.ndarray) -> np.ndarray:
    """For each arm, the best mean among the other arms (at least two arms)."""
    top2 = np.argpartition(-mean, 1)[:2]
    best, second = (top2 if mean[top2[0]] >= mean[top2[1]] else top2[::-1])
    other = np.full(len(mean), mean[best])
    other[best] = mean[second]
    return other


def knowledge_gradient(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Expected rise of the best posterior mean from one more outcome of each arm.

    One outcome of quality 1 (probability = the arm's mean) or 0 moves the arm's mean
    to ``(alpha + 1) / (n + 1)`` or ``alpha / (n + 1)``; the gain is what that does to
    the maximum over arms, against the maximum now. Zero for a lone arm.
    """
    n = alpha + beta
    mean = alpha / n
    if len(mean) < 2:
        return np.zeros(len(mean))
    other = best_other(mean)
    up = (alpha + 1.0) / (n + 1.0)
    down = alpha / (n + 1.0)
    gain = (mean * np.maximum(up, other) + (1.0 - mean) * np.maximum(down, other)
            - np.maximum(mean, other))
    return np.asarray(np.maximum(gain, 0.0))


@lru_cache(maxsize=64)
def _binomial(m: int) -> tuple[np.ndarray, np.ndarray]:
    """``k = 0..m`` and log C(m, k)."""
    k = np.arange(m + 1.0)
    return k, np.array([math.lgamma(m + 1) - math.lgamma(i + 1) - math.lgamma(m - i + 1)
                        for i in range(m + 1)])


def _log_rising(x: np.ndarray, m: int) -> np.ndarray:
    """Column ``k = 0..m``: log(x (x + 1) ... (x + k - 1)) = lgamma(x + k) - lgamma(x)."""
    steps = np.log(x[:, None] + np.arange(m))
    return np.concatenate([np.zeros((len(x), 1)), np.cumsum(steps, axis=1)], axis=1)


def knowledge_gradient_m(alpha: np.ndarray, beta: np.ndarray, m: int) -> np.ndarray:
    """``KG_m / m``: the expected rise of the best posterior mean from ``m`` more
    outcomes of each arm, per outcome (the number of good ones is Beta-binomial).

    One outcome may not lift an arm past the best where a few could; the value per
    outcome of looking further ahead (KG(*), Frazier & Powell, "Paradoxes in learning
    and the marginal value of information", Decision Analysis 2010) gives it its due.
    """
    n = alpha + beta
    mean = alpha / n
    if len(mean) < 2 or m < 1:
        return np.zeros(len(mean))
    other = best_other(mean)
    gain = np.zeros(len(mean))
    can = np.flatnonzero((alpha + m) / (n + m) > other)  # else m good outcomes fall short
    if not can.size:
        return gain
    alpha, beta, n, mean, other = alpha[can], beta[can], n[can], mean[can], other[can]
    good, log_choose = _binomial(m)
    # P(k good of m) = C(m, k) B(alpha + k, beta + m - k) / B(alpha, beta), in rising
    # factorials: alpha^(k) beta^(m - k) / n^(m)
    log_p = (log_choose + _log_rising(alpha, m) + _log_rising(beta, m)[:, ::-1]
             - _log_rising(n, m)[:, -1:])
    then = (np.exp(log_p) * np.maximum((alpha[:, None] + good) / (n[:, None] + m),
                                       other[:, None])).sum(axis=1)
    gain[can] = np.maximum(then - np.maximum(mean, other), 0.0) / m
    return gain


class KnowledgeGradient(PooledPosterior):
    """Posterior mean plus the value of what one more outcome would teach, times budget."""

    name = "knowledge_gradient"
    params_model = BudgetParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self._decisions: dict[str, int] = {}  # decisions per task type (this router)
        self._judged: dict[str, int] = {}  # outcomes observed per task type
        self._deciding: str | None = None  # the task type score() is deciding
        self._coming: dict[str, np.ndarray] | None = None  # outcomes on their way
        #: the candidates' runs awaiting verdicts on each task type, aligned with their
        #: names, and the book's version of those counts (so only changed types are read)
        self._waiting: tuple[ProfileBook | None, tuple[str, ...],
                             dict[str, tuple[int, np.ndarray]]] = (None, (), {})

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        """Count the judged outcome, then fold it into the posterior."""
        self._judged[record.task_type] = self._judged.get(record.task_type, 0) + 1
        super().observe(record, seq, book)

    def amend(self, agent_id: str, task_type: str, old: WindowEntry | None,
              new: WindowEntry | None, book: ProfileBook) -> None:
        """A late verdict: a run that had no quality evidence and now has some is one
        more judged outcome (and one that loses its evidence, one fewer)."""
        judged = (new is not None and new.quality is not None) \
            - (old is not None and old.quality is not None)
        if judged:
            self._judged[task_type] = max(self._judged.get(task_type, 0) + judged, 0)
        super().amend(agent_id, task_type, old, new, book)

    def reset(self, book: ProfileBook) -> None:
        """Rebuild from the book; outcome counts from its clocks (decisions unknown: as
        many as outcomes, i.e. every one judged, until new decisions say otherwise)."""
        super().reset(book)
        types = {state.task_type for state in book}
        self._judged = {t: book.clock(t) for t in types}
        self._decisions = {t: max(self._decisions.get(t, 0), n)
                           for t, n in self._judged.items()}

    def budget(self, task_type: str, uncounted: int = 0) -> float:
        """Judged outcomes of ``task_type`` still to come that a lesson learned now serves
        (``uncounted``: decisions counted already but left out)."""
        p = self.params
        assert isinstance(p, BudgetParams)
        decided = self._decisions.get(task_type, 0) - uncounted
        if p.half_life_executions is not None:
            serves = p.half_life_executions / math.log(2.0)  # mean life of a discounted run
        else:
            serves = float(max(decided, 1))  # no discounting: the future is as long as the past
        if p.horizon_executions is not None:
            serves = min(serves, max(p.horizon_executions - decided, 0.0))
        return serves * self.judged_share(task_type, decided)

    def judged_share(self, task_type: str, decided: int | None = None) -> float:
        """The share of executions that get judged: ``feedback_rate``, else judged
        outcomes per decision of the type, one of each assumed (no evidence: all)."""
        p = self.params
        assert isinstance(p, BudgetParams)
        if p.feedback_rate is not None:
            return p.feedback_rate
        if decided is None:
            decided = self._decisions.get(task_type, 0)
        return min(1.0, (self._judged.get(task_type, 0) + 1.0) / (decided + 1.0))

    def coming(self, arms: Sequence[Arm], ctx: StrategyContext) -> dict[str, np.ndarray] | None:
        """Per task type, the outcomes on their way for each arm: its runs awaiting a
        verdict there times the judged share (None when none of the arms has a run
        awaiting one on this task type)."""
        own = [0 if arm.state is None else arm.state.pending for arm in arms]
        if not any(own):
            return None
        share = self.judged_share(ctx.task_type)
        out = {ctx.task_type: share * np.asarray(own, dtype=float)}
        names = tuple(arm.agent_id for arm in arms)
        book, held_names, kept = self._waiting
        if book is not ctx.book or held_names != names:
            kept = {}
        waiting: dict[str, tuple[int, np.ndarray]] = {}
        for task_type, version in ctx.book.pending_versions().items():
            if task_type != ctx.task_type:
                held = kept.get(task_type)
                if held is None or held[0] != version:  # counts there changed: align again
                    by_agent = ctx.book.pending_on(task_type)
                    held = (version, np.array([by_agent.get(n, 0) for n in names], float))
                waiting[task_type] = held
                if held[1].any():
                    out[task_type] = share * held[1]
        self._waiting = (ctx.book, names, waiting)
        return out

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        """Counts the decision (the budget's horizon), notes the outcomes on their way,
        then ranks as every pooled posterior strategy does, exploring by ``explore``."""
        self._decisions[ctx.task_type] = self._decisions.get(ctx.task_type, 0) + 1
        self._deciding = ctx.task_type
        self._coming = self.coming(arms, ctx)
        try:
            return super().score(arms, ctx)
        finally:
            self._deciding, self._coming = None, None

    def gain(self, alpha: np.ndarray, beta: np.ndarray, task_type: str,
             slots: np.ndarray | None, coming: Mapping[str, np.ndarray] | None = None
             ) -> np.ndarray:
        """The gain of one more outcome of each arm, looked ahead when every arm is
        affordable, times the lesson's reach (``coming``: outcomes on their way, per
        task type, which the reach's prior shares count as evidence)."""
        gain = knowledge_gradient(alpha, beta)
        # the subsample affordable, as of the decisions made (prepared or in select alike)
        before = self.budget(task_type, uncounted=int(self._deciding == task_type))
        ahead = math.ceil(math.sqrt(before))
        if 2 <= len(gain) <= ahead:  # every arm affordable: look that far ahead too
            gain = np.maximum(gain, knowledge_gradient_m(alpha, beta, ahead))
        if self.params.pooling and slots is not None:  # the lesson's reach
            gain *= 1.0 + self.ledger.prior_shares(task_type, slots,
                                                   self.params.prior_strength, coming)
        return gain

    def derive(self, post: Posterior, task_type: str) -> None:
        """The posterior means and the gain of one more outcome of each arm."""
        post.derived["mean"] = post.mean
        post.derived["gain"] = self.gain(post.alpha, post.beta, task_type, post.slots)

    def explore(self, post: Posterior, ctx: StrategyContext) -> list[ArmScore]:
        """Knowledge-gradient indexes: mean + budget x the expected gain of one outcome.

        Outcomes on their way (runs awaiting a verdict, times the judged share) count as
        evidence that will arrive before a new run's (GP-BUCB's hallucinated
        observations: the mean stays, the uncertainty shrinks), so a run of decisions
        waiting for verdicts does not keep exploring the same arm."""
        budget = self.budget(ctx.task_type)
        derived, coming = post.derived, self._coming
        if coming is not None:  # runs in flight change with every decision: not cached
            mean, own = post.mean, coming.get(ctx.task_type, 0.0)
            gain = self.gain(post.alpha + mean * own, post.beta + (1.0 - mean) * own,
                             ctx.task_type, post.slots, coming)
        else:
            if "gain" not in derived:  # once per posterior: decisions without outcomes reuse it
                self.derive(post, ctx.task_type)
            mean, gain = derived["mean"], derived["gain"]
        index = mean + budget * gain
        return self.verdicts(post, index, f"index (budget {budget:.0f} outcomes)", "index")

"""AgentRouter: choose an agent for each task, record how it went, learn.

``select`` reads only in-memory state, so a decision costs microseconds; only with
``acquire=True`` against a server does it take a lease in the store (one round trip,
``router.limits``). ``record`` appends to the store's execution log, then folds the row into
the router's projection of the log (``trustroute.router.projection``): the profile
book places it, and the strategy and the trust layer learn from it, in order. Against a
server the projection also follows what other processes record. Store methods have
async twins (``arecord``, ...) in a thread.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileSettings, TaskTypeProfile, empty_profile
from trustroute.profiles.records import ExecutionRecord, check_identifier, utc_now
from trustroute.profiles.store import DuplicateRecord, Store
from trustroute.profiles.validation import quoted
from trustroute.router.agents import AgentLike, AgentSpec, as_specs
from trustroute.router.async_twin import carried_out, in_thread
from trustroute.router.decision import CandidateScore, RoutingDecision, new_decision_id
from trustroute.router.errors import AgentAtCapacity, UnknownAgent, no_agent_left, unlisted_agent
from trustroute.router.feedback.policy import FeedbackPolicy
from trustroute.router.feedback.state import FeedbackState
from trustroute.router.learner import Learner, ProfileSnapshots, StrategyLearner
from trustroute.router.limits import LimitSettings
from trustroute.router.load import InFlightTracker, Lease, discounted
from trustroute.router.options import options_of
from trustroute.router.people import TrustMethods, check_pair
from trustroute.router.projection import LogProjection
from trustroute.router.recording import admit_all, as_judged, build_record
from trustroute.router.report import write_report
from trustroute.router.strategies import (
    DEFAULT_STRATEGY,
    Arm,
    Strategy,
    StrategyContext,
    make_strategy,
)
from trustroute.router.trust.abstention import AbstentionPolicy
from trustroute.router.trust.layer import TrustLayer
from trustroute.router.trust.options import TrustOptions

if TYPE_CHECKING:
    from trustroute.router.handoff.transfer import TransferDispatcher

UnknownAgents = Literal["warn", "error", "allow"]


def best_first(scores: Sequence[float], ties: Sequence[float]) -> list[int]:
    """Indices of ``scores``, highest first, equal ones in the order of ``ties`` (random
    draws), NaN last (as numpy sorts). Sorting a few numbers costs less in Python."""
    if any(s != s for s in scores):
        return sorted(range(len(scores)), key=lambda i: (
            scores[i] != scores[i], -scores[i] if scores[i] == scores[i] else 0.0, ties[i]))
    # the common case: plain tuples compare in C, with no key function per element
    keyed = zip([-s for s in scores], ties, range(len(scores)), strict=True)
    return [i for _, _, i in sorted(keyed)]


class AgentRouter(TrustMethods):
    """Routes tasks to agents and learns from every recorded outcome."""

    def __init__(
        self,
        agents: Iterable[AgentLike] = (),
        *,
        store: str | Store | None = None,
        strategy: str | Strategy = DEFAULT_STRATEGY,
        strategy_params: Mapping[str, Any] | None = None,
        seed: int | None = None,
        settings: ProfileSettings | Mapping[str, Any] | None = None,
        exploit_only: bool = False,
        store_options: Mapping[str, Any] | None = None,
        trust: TrustOptions | Mapping[str, Any] | None = None,
        abstention: AbstentionPolicy | Mapping[str, Any] | None = None,
        transfer: TransferDispatcher | None = None,
        unknown_agents: UnknownAgents = "warn",
        limits: LimitSettings | Mapping[str, Any] | None = None,
        feedback: FeedbackPolicy | Mapping[str, Any] | None = None,
    ) -> None:
        self.settings = options_of(ProfileSettings, settings, "settings")
        self.limits = options_of(LimitSettings, limits, "limits")  # shared on a server
        trust_options = options_of(TrustOptions, trust, "trust")
        abstention_policy = options_of(AbstentionPolicy, abstention, "abstention")
        self._agents: dict[str, AgentSpec] = as_specs(agents)
        if not isinstance(strategy, str | Strategy):
            raise TypeError(f"strategy must be a name or a Strategy, got {quoted(strategy)}")
        if not isinstance(strategy_params, Mapping | None):
            raise TypeError(f"strategy_params must be a mapping, got {quoted(strategy_params)}")
        self.strategy: Strategy = make_strategy(strategy, **dict(strategy_params or {})) \
            if isinstance(strategy, str) else strategy
        if unknown_agents not in get_args(UnknownAgents):
            raise ValueError("unknown_agents must be warn, error or allow, got "
                             f"{quoted(unknown_agents)}")
        self.unknown_agents: UnknownAgents = unknown_agents  # record() of an unlisted agent
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                 or seed < 0):
            raise ValueError(f"seed must be a whole number >= 0 or None, got {quoted(seed)}")
        self._rng = np.random.default_rng(seed)
        self._lock = threading.RLock()
        self._owns_store = not isinstance(store, Store)
        self.store = store if isinstance(store, Store) else Store(
            store, **dict(store_options or {}))
        self.slots = InFlightTracker.for_store(self.store, self.limits)
        self.transfer = transfer  # hand-offs to a person: undeliverable ones kept pending
        with contextlib.ExitStack() as failed:  # a failed open leaves nothing locked/open
            if self._owns_store:
                failed.callback(self.store.close)
            self.book = ProfileBook(self.settings.recency.window_size)
            self.feedback_policy = FeedbackPolicy.of(feedback)  # docs/feedback.md
            verdicts = FeedbackState(self.feedback_policy)
            self.trust_layer = TrustLayer(self.store, self.strategy.name, trust_options,
                                          abstention_policy, transfer, exploit_only=exploit_only,
                                          feedback=verdicts)
            self.projection = LogProjection(  # the book and the learners, from the log
                self.store, self.book, StrategyLearner(self.strategy, self.book, verdicts),
                self.trust_layer, self._lock, verdicts)
            self.learners: list[Learner] = self.projection.learners
            self.learners.append(ProfileSnapshots(self.book, self.settings))  # last: hot
            self.projection.rebuild(cached=True)  # the cached projection, if it verifies
            failed.pop_all()
        if self.store.location.is_remote:
            self.projection.follow()  # other processes write too: fold their records

    # -- life cycle ------------------------------------------------------------------
    @classmethod
    def from_config(cls, path: str | Path, **overrides: Any) -> AgentRouter:
        """Build a router from a YAML, TOML or JSON config file."""
        from trustroute.router.config import load_config

        return load_config(path).build_router(**overrides)

    def refresh(self) -> None:
        """Read the whole log and rebuild the book and every learner from it."""
        self.projection.rebuild()

    arefresh = in_thread(refresh)

    def close(self) -> None:
        """Write the buffered decision log; close the store if this router opened it.
        A server that does not answer is waited for once, not once per write."""
        try:
            self.slots.close()  # give back shared leases (they would expire anyway)
            self.projection.stop()
            answered = self.projection.save()  # the next router opens from it
            self.trust_layer.close(flush=answered)
        finally:
            if self._owns_store:
                self.store.close()

    aclose = in_thread(close)

    def __enter__(self) -> AgentRouter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> AgentRouter:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    @property
    def exploit_only(self) -> bool:
        """No exploration (settable): the posterior strategies rank by the lower bound, and
        the tier policy routes only to core/strong-tier agents when any is eligible."""
        return self.trust_layer.gate.exploit_only

    @exploit_only.setter
    def exploit_only(self, value: bool) -> None:
        self.trust_layer.gate.exploit_only = bool(value)

    # -- registry --------------------------------------------------------------------
    @property
    def agents(self) -> dict[str, AgentSpec]:
        """Registered agents by id (a copy)."""
        return dict(self._agents)

    def register(self, agent: AgentLike) -> AgentSpec:
        """Add or replace one agent."""
        spec = next(iter(as_specs([agent]).values()))
        with self._lock:
            self._agents[spec.id] = spec
        return spec

    def agent(self, agent_id: str) -> AgentSpec:
        """The spec of a registered agent."""
        try:
            return self._agents[agent_id]
        except KeyError:
            raise UnknownAgent(agent_id, self._agents) from None

    # -- load ------------------------------------------------------------------------
    def acquire(self, agent_id: str) -> Lease:
        """Take a slot of ``agent_id`` (a context manager; raises at capacity or rpm)."""
        spec = self.agent(agent_id)
        return self.slots.acquire(agent_id, spec.max_concurrent, spec.rpm)

    def in_flight(self, agent_id: str) -> int:
        """Tasks running on ``agent_id`` (shared limits: the store's last word, if larger)."""
        return self.slots.counts.get(agent_id, 0)

    # -- profiles --------------------------------------------------------------------
    def profile(self, agent_id: str, task_type: str, *, now: datetime | None = None
                ) -> TaskTypeProfile:
        """What has been learned about one pair (an empty profile when nothing has);
        ``now``: the moment its recency is measured at. Runs awaiting a verdict are settled
        by the clock, never by ``now``: a read must not change what every router holds."""
        if not isinstance(now, datetime | None) or (now is not None and now.tzinfo is None):
            raise TypeError(f"now must be a timezone-aware datetime or None, got {now!r}")
        check_pair(agent_id, task_type)
        self.trust_layer.settle_due(utc_now())  # runs whose wait for feedback is over
        state = self.book.get(agent_id, task_type)
        if state is None:
            return empty_profile(agent_id, task_type)
        return state.snapshot(now or utc_now(), self.settings)

    def profiles(self, task_type: str | None = None) -> list[TaskTypeProfile]:
        """Every learned profile, optionally for one task type, best adjusted score first."""
        now = utc_now()
        self.trust_layer.settle_due(now)
        states = list(self.book) if task_type is None else \
            self.book.for_task_type(check_identifier(task_type, "task_type"))
        snaps = [s.snapshot(now, self.settings) for s in states]
        return sorted(snaps, key=lambda p: (p.task_type, -p.adjusted_score, p.agent_id))

    # -- decisions -------------------------------------------------------------------
    def select(self, task_type: str, *, exclude: Sequence[str] = (),
               context: Mapping[str, Any] | None = None, acquire: bool = False
               ) -> RoutingDecision:
        """Rank the eligible agents for ``task_type`` and choose one.

        ``exclude`` removes agents (for example ones that already failed on this task);
        with ``acquire=True`` the chosen agent's in-flight slot is taken atomically and
        released by ``record(decision)`` or ``decision.release()``.
        """
        check_identifier(task_type, "task_type")
        now = utc_now()
        ranked, lease = self._rank(task_type, exclude, now, acquire)
        verdict = self.trust_layer.gate.judge(task_type, ranked)
        decision = RoutingDecision(
            decision_id=new_decision_id(), task_type=task_type, agent_id=ranked[0].agent_id,
            candidates=tuple(ranked), strategy=self.strategy.name, created_at=now,
            confidence=verdict.confidence, tier=verdict.tier, abstained=verdict.abstained,
            abstain_reason=verdict.abstain_reason, context=context, lease=lease)
        # buffered for the decision log (no I/O); an abstention triggers on_abstain
        self.trust_layer.gate.settle(decision, verdict)
        return decision

    def _rank(self, task_type: str, exclude: Sequence[str], now: datetime, acquire: bool
              ) -> tuple[list[CandidateScore], Lease | None]:
        """The ranked candidates and, with ``acquire``, the first one's slot (a shared one
        outside the lock: a store round trip; refused, it is ranked again without it)."""
        busy: set[str] = set()  # agents whose shared lease the store refused just now
        while True:
            with self._lock:
                self.trust_layer.settle_due(now)  # runs whose wait for a verdict is over
                arms, loads = self._arms(task_type, exclude, now, busy)
                ctx = StrategyContext(task_type=task_type, now=now, book=self.book,
                                      settings=self.settings, rng=self._rng,
                                      exploit_only=self.exploit_only)
                verdicts = self.strategy.score(arms, ctx)
                ties = self._rng.random(len(arms)).tolist()
                scored = [CandidateScore(agent_id=arm.agent.id, profile=arm.profile,
                                         load=load, score=verdict.score, verdict=verdict,
                                         final_score=discounted(verdict.score, load) if load
                                         else verdict.score)
                          for arm, verdict, load in zip(arms, verdicts, loads, strict=True)]
                order = best_first([c.final_score for c in scored], ties)
                # trust tiers: deprecated agents and (exploit-only) untrusted ones move last
                ranked = self.trust_layer.gate.admit(task_type, [scored[i] for i in order])
                if not acquire or self.slots.shared is None:  # chosen and taken at once
                    return ranked, self.acquire(ranked[0].agent_id) if acquire else None
            with contextlib.suppress(AgentAtCapacity):  # another process took the last
                return ranked, self.acquire(ranked[0].agent_id)
            busy.add(ranked[0].agent_id)

    async def aselect(self, task_type: str, *, exclude: Sequence[str] = (),
                      context: Mapping[str, Any] | None = None, acquire: bool = False
                      ) -> RoutingDecision:
        """Async ``select``; in a thread when it may touch the store (taking a shared
        lease, or storing the hand-off of an abstention under ``on_abstain: human``),
        whose lease is given back if the caller is cancelled meanwhile."""
        shared = acquire and self.slots.shared is not None
        if shared or self.trust_layer.gate.abstention.on_abstain == "human":
            return await carried_out(self.select, task_type, exclude=exclude, context=context,
                                     acquire=acquire, undo=RoutingDecision.release)
        return self.select(task_type, exclude=exclude, context=context, acquire=acquire)

    def _arms(self, task_type: str, exclude: Sequence[str], now: datetime,
              busy: set[str]) -> tuple[list[Arm], list[float]]:
        """Enabled agents accepting ``task_type``, not excluded, full nor ``busy``, with
        their loads; NoAgentAvailable says why when there is none."""
        if isinstance(exclude, str) or not isinstance(exclude, Iterable):
            kind = "the string " if isinstance(exclude, str) else ""
            raise TypeError(f"exclude must be a list of agent ids, not {kind}{quoted(exclude)}")
        arms, loads, excluded, full = [], [], 0, {True: 0, False: 0}  # full: by max_concurrent?
        in_flight, gated = self.slots.counts, bool(busy) or self.slots.gated
        stamp = now.timestamp()  # one moment for every candidate's snapshot
        for spec in self._agents.values():
            if not (spec.enabled and spec.accepts(task_type)):
                continue
            if spec.id in exclude:
                excluded += 1
                continue
            running = in_flight.get(spec.id, 0)
            if running >= spec.max_concurrent or (gated and self.slots.blocked(spec, busy)):
                full[running >= spec.max_concurrent] += 1
                continue
            state = self.book.get(spec.id, task_type)
            profile = (state.snapshot(now, self.settings, stamp) if state is not None
                       else empty_profile(spec.id, task_type))
            arms.append(Arm(spec, state, profile))
            loads.append(running / spec.max_concurrent)
        if not arms:
            raise no_agent_left(task_type, excluded, full[True], full[False])
        return arms, loads

    # -- outcomes --------------------------------------------------------------------
    def record(self, decision: RoutingDecision | ExecutionRecord | None = None, *,
               agent_id: str | None = None, task_type: str | None = None,
               success: bool | None = None, quality: float | None = None,
               latency_ms: float = 0.0, cost: float | None = None,
               timestamp: datetime | None = None, record_id: str | None = None,
               metadata: Mapping[str, Any] | None = None, run_ids: Sequence[str] = ()
               ) -> ExecutionRecord:
        """Record one execution; returns the stored ExecutionRecord, its ``quality``
        the one it counts with (None while it awaits a verdict: docs/feedback.md).
        Pass the decision from ``select`` (its agent and task type are used and its
        lease released), or ``agent_id`` and ``task_type`` directly, or a ready
        ``ExecutionRecord`` (as it is, a missing cost aside: other fields are a TypeError). A
        ``record_id`` this router has already folded raises ``DuplicateRecord`` and
        changes nothing; the same record stored by an earlier try whose answer was lost
        is folded now, once. An agent this router does not list is recorded, with a
        warning or an error as ``unknown_agents`` says. ``run_ids``: its LangChain run
        ids, refs for ``feedback`` (docs/feedback.md).
        """
        rec = build_record(decision, self._agents, agent_id=agent_id, task_type=task_type,
                           success=success, quality=quality, latency_ms=latency_ms,
                           cost=cost, timestamp=timestamp, record_id=record_id,
                           metadata=metadata, run_ids=run_ids)
        try:
            self.settings.admit(rec)
            self.check_agent(rec.agent_id)
            if not self.projection.append([rec]):
                raise DuplicateRecord(rec.record_id)
        finally:
            if isinstance(decision, RoutingDecision):
                decision.release()
        self.trust_layer.maybe_flush()
        return as_judged(rec, self.projection.feedback.quality_of(rec.record_id))

    arecord = in_thread(record)

    def record_many(self, records: Iterable[ExecutionRecord], *, batch_size: int = 500
                    ) -> int:
        """Bulk-write any iterable, one transaction per batch drawn; returns how many
        were new. Records are checked as ``record`` checks them, a list or tuple whole
        before anything is written, any other iterable batch by batch."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
        whole = isinstance(records, list | tuple)
        if isinstance(records, list | tuple):
            records = admit_all(records, self.settings, self.check_agent, self._agents)
        written, pending = 0, iter(records)
        while chunk := list(islice(pending, batch_size)):
            if not whole:
                chunk = admit_all(chunk, self.settings, self.check_agent, self._agents)
            written += len(self.projection.append(chunk))
            self.trust_layer.maybe_flush()
        return written

    arecord_many = in_thread(record_many)

    def check_agent(self, agent_id: str) -> None:
        """Warn about (or refuse) outcomes of an agent this router does not list."""
        if self._agents and agent_id not in self._agents and self.unknown_agents != "allow":
            if self.unknown_agents == "error":
                raise UnknownAgent(agent_id, self._agents)
            warnings.warn(unlisted_agent(agent_id, self._agents), stacklevel=3)

    report = write_report  # report(path="report.html", task_type=, since=): the HTML page


"""AgentRouter: choose an agent for each task, record how it went, learn.

``select`` reads only the in-memory ``ProfileBook`` (never the database) so a decision
costs microseconds; ``record`` writes one transaction to the store and then folds the
committed record into the book and the strategy. The async twins run the database write
in a worker thread so an event loop is never blocked.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileSettings, TaskTypeProfile, empty_profile
from trustroute.profiles.records import ExecutionRecord, check_identifier, utc_now
from trustroute.profiles.store import Store
from trustroute.router.agents import AgentLike, AgentSpec, as_specs
from trustroute.router.decision import CandidateScore, RoutingDecision, new_decision_id
from trustroute.router.errors import NoAgentAvailable, UnknownAgent
from trustroute.router.explanation import Deferred
from trustroute.router.handoff.transfer import TransferDispatcher
from trustroute.router.load import InFlightTracker, Lease
from trustroute.router.recording import build_record
from trustroute.router.strategies import (
    DEFAULT_STRATEGY,
    Arm,
    ArmScore,
    Strategy,
    StrategyContext,
    make_strategy,
)
from trustroute.router.trust.abstention import AbstentionPolicy
from trustroute.router.trust.layer import TrustLayer, TrustOptions
from trustroute.router.trust.scores import TrustScores

if TYPE_CHECKING:
    from trustroute.router.trust.lifecycle import DecayReport

_SNAPSHOT_SECONDS = 60.0  # expertise drifts by < 0.02% a minute at the 7-day time constant
_ELIGIBLE_CACHE_LIMIT = 1024  # task types whose ranked arms are cached at once


class _VerdictWithLoad(Deferred):
    """A candidate's reason and components: its verdict's, plus the load when non-zero."""

    __slots__ = ()

    def explain(self, key: Any) -> tuple[str, Mapping[str, float]]:
        """``key`` is the strategy's ArmScore, or (that ArmScore, the agent's load)."""
        if isinstance(key, ArmScore):
            return key.reason, key.components
        verdict, load = key
        return f"{verdict.reason}; load {load:.2f}", verdict.components


_FROM_VERDICT = _VerdictWithLoad()


class AgentRouter:
    """Routes tasks to agents and learns from every recorded outcome."""

    def __init__(
        self,
        agents: Iterable[AgentLike] = (),
        *,
        store: str | Store | None = None,
        strategy: str | Strategy = DEFAULT_STRATEGY,
        strategy_params: Mapping[str, Any] | None = None,
        seed: int | None = None,
        settings: ProfileSettings | None = None,
        exploit_only: bool = False,
        store_options: Mapping[str, Any] | None = None,
        trust: TrustOptions | None = None,
        abstention: AbstentionPolicy | None = None,
        transfer: TransferDispatcher | None = None,
    ) -> None:
        self.settings = settings or ProfileSettings()
        self._agents: dict[str, AgentSpec] = as_specs(agents)
        self.strategy: Strategy = (
            make_strategy(strategy, **dict(strategy_params or {}))
            if isinstance(strategy, str) else strategy
        )
        self.exploit_only = exploit_only
        self._rng = np.random.default_rng(seed)
        self._lock = threading.RLock()
        self._in_flight = InFlightTracker()
        self._owns_store = not isinstance(store, Store)
        self.store = store if isinstance(store, Store) else Store(
            store, window_size=self.settings.recency.window_size, **dict(store_options or {}))
        # hand-offs to a person: undeliverable requests are kept pending in this store
        self.transfer = transfer
        if transfer is not None:
            transfer.bind_store(self.store)
        self.book = ProfileBook(self.settings.recency.window_size)
        self._snapshots: dict[tuple[str, str], tuple[int, float, TaskTypeProfile]] = {}
        self._eligible_cache: dict[str, tuple[int, tuple[AgentSpec, ...], float,
                                              list[tuple[AgentSpec, Arm]]]] = {}
        self.trust_layer = TrustLayer(self.store, self.strategy.name, trust, abstention,
                                      transfer, exploit_only=exploit_only)
        self.refresh()

    # -- life cycle ------------------------------------------------------------------
    @classmethod
    def from_config(cls, path: str | Path, **overrides: Any) -> AgentRouter:
        """Build a router from a YAML, TOML or JSON config file."""
        from trustroute.router.config import load_config

        return load_config(path).build_router(**overrides)

    def refresh(self) -> None:
        """Reload every profile from the store (on open, or to see other processes' work)."""
        self.trust_layer.reload()
        states, clocks = self.store.executions.load()
        with self._lock:
            self.book.replace(states, clocks)
            self._snapshots.clear()
            self._eligible_cache.clear()
            self.strategy.reset(self.book)

    def close(self) -> None:
        """Write buffered trust/decision-log updates; close the store if this router opened it."""
        try:
            self.trust_layer.close()
        finally:
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> AgentRouter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

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
            raise UnknownAgent(agent_id) from None

    # -- load ------------------------------------------------------------------------
    def acquire(self, agent_id: str) -> Lease:
        """Take an in-flight slot of ``agent_id`` (a context manager; raises at capacity)."""
        return self._in_flight.acquire(agent_id, self.agent(agent_id).max_concurrent)

    def in_flight(self, agent_id: str) -> int:
        """Tasks currently running on ``agent_id``."""
        return self._in_flight.in_flight(agent_id)

    # -- profiles --------------------------------------------------------------------
    def profile(self, agent_id: str, task_type: str, *, now: datetime | None = None
                ) -> TaskTypeProfile:
        """What has been learned about one pair (an empty profile when nothing has)."""
        state = self.book.get(agent_id, task_type)
        if state is None:
            return empty_profile(agent_id, task_type)
        return state.snapshot(now or utc_now(), self.settings)

    def profiles(self, task_type: str | None = None) -> list[TaskTypeProfile]:
        """Every learned profile, optionally for one task type, best adjusted score first."""
        now = utc_now()
        states = self.book.for_task_type(task_type) if task_type else list(self.book)
        snaps = [s.snapshot(now, self.settings) for s in states]
        return sorted(snaps, key=lambda p: (p.task_type, -p.adjusted_score, p.agent_id))

    def _snapshot(self, agent_id: str, task_type: str, now: datetime) -> tuple[
            Any, TaskTypeProfile]:
        state = self.book.get(agent_id, task_type)
        if state is None:
            return None, empty_profile(agent_id, task_type)
        key = (agent_id, task_type)
        stamp = now.timestamp()
        cached = self._snapshots.get(key)
        if cached and cached[0] == state.executions_total and stamp - cached[1] < \
                _SNAPSHOT_SECONDS:
            return state, cached[2]
        snap = state.snapshot(now, self.settings)
        self._snapshots[key] = (state.executions_total, stamp, snap)
        return state, snap

    def _eligible(self, task_type: str, now: datetime) -> list[tuple[AgentSpec, Arm]]:
        """Enabled agents accepting ``task_type``, each with its arm (profile snapshot).

        Cached per task type until one of its profiles changes (book revision), the
        registry changes or the snapshots are ``_SNAPSHOT_SECONDS`` old, so a stream of
        decisions builds no pydantic snapshot and no Arm; load is applied per call.
        """
        revision = self.book.revision(task_type)
        agents = tuple(self._agents.values())
        stamp = now.timestamp()
        cached = self._eligible_cache.get(task_type)
        if (cached is not None and cached[0] == revision and cached[1] == agents
                and 0.0 <= stamp - cached[2] < _SNAPSHOT_SECONDS):
            return cached[3]
        eligible = []
        for spec in agents:
            if spec.enabled and spec.accepts(task_type):
                state, snap = self._snapshot(spec.id, task_type, now)
                eligible.append((spec, Arm(spec, state, snap)))
        if len(self._eligible_cache) >= _ELIGIBLE_CACHE_LIMIT:
            self._eligible_cache.clear()
        self._eligible_cache[task_type] = (revision, agents, stamp, eligible)
        return eligible

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
        with self._lock:
            counts = self._in_flight.counts
            arms, loads = [], []
            skipped_full = 0
            for spec, arm in self._eligible(task_type, now):
                if spec.id in exclude:
                    continue
                in_flight = counts.get(spec.id, 0)
                if in_flight >= spec.max_concurrent:
                    skipped_full += 1
                    continue
                arms.append(arm)
                loads.append(in_flight / spec.max_concurrent)
            if not arms:
                detail = (f"{skipped_full} eligible agent(s) at capacity" if skipped_full
                          else "no registered, enabled agent accepts it")
                raise NoAgentAvailable(task_type, detail)
            ctx = StrategyContext(task_type, now, self.book, self.settings, self._rng,
                                  self.exploit_only)
            scores = self.strategy.score(arms, ctx)
            ties = self._rng.random(len(arms)).tolist()
            deferred = CandidateScore.deferred
            candidates = []
            for i, (arm, verdict, load, tie) in enumerate(
                    zip(arms, scores, loads, ties, strict=True)):
                s = final = verdict.score
                if load:
                    final = s / (1.0 + load) if s >= 0 else s * (1.0 + load)
                p = arm.profile
                # (-final, tie, i): best first, seeded-random among equals; i keeps sort stable
                candidates.append((-final, tie, i, deferred(
                    arm.agent.id, p.expertise, p.confidence, p.adjusted_score,
                    p.executions_total, load, s, final, _FROM_VERDICT,
                    (verdict, load) if load else verdict), verdict.success_probability))
            candidates.sort()
            # trust tiers: deprecated agents and (exploit-only) untrusted ones move last
            candidates = self.trust_layer.order(task_type, candidates, self.exploit_only)
            best = candidates[0]
            lease = self.acquire(best[3].agent_id) if acquire else None
        decision = RoutingDecision(  # positional: the fields' order, cheaper than keywords
            new_decision_id(), task_type, best[3].agent_id, tuple(c[3] for c in candidates),
            self.strategy.name, now, None, None, False, None, context, lease)
        # calibrated confidence, tier, abstention; buffered for the decision log (no I/O)
        return self.trust_layer.decide(decision, [c[4] for c in candidates])

    async def aselect(self, task_type: str, *, exclude: Sequence[str] = (),
                      context: Mapping[str, Any] | None = None, acquire: bool = False
                      ) -> RoutingDecision:
        """Async ``select``: pure in-memory work, safe to run on the event loop."""
        return self.select(task_type, exclude=exclude, context=context, acquire=acquire)

    # -- outcomes --------------------------------------------------------------------
    def record(self, decision: RoutingDecision | ExecutionRecord | None = None, *,
               agent_id: str | None = None, task_type: str | None = None,
               success: bool | None = None, quality: float | None = None,
               latency_ms: float = 0.0, cost: float | None = None,
               timestamp: datetime | None = None, record_id: str | None = None,
               metadata: Mapping[str, Any] | None = None) -> ExecutionRecord:
        """Record one execution; returns the stored ExecutionRecord.

        Pass the decision from ``select`` (its agent and task type are used and its
        lease released), or ``agent_id`` and ``task_type`` directly, or a ready
        ``ExecutionRecord``. Writing the same ``record_id`` twice stores it once.
        """
        if isinstance(decision, ExecutionRecord):
            rec = decision
        else:
            rec = build_record(decision, self._agents, agent_id=agent_id,
                               task_type=task_type, success=success, quality=quality,
                               latency_ms=latency_ms, cost=cost, timestamp=timestamp,
                               record_id=record_id, metadata=metadata)
        try:
            self.trust_layer.prefetch([(rec.agent_id, rec.task_type)])  # first use: 1 read
            seq = self.store.executions.record(rec)
            if seq is not None:
                self._apply(rec, seq)
        finally:
            if isinstance(decision, RoutingDecision):
                decision.release()
        self.trust_layer.maybe_flush()
        return rec

    async def arecord(self, decision: RoutingDecision | ExecutionRecord | None = None,
                      **fields: Any) -> ExecutionRecord:
        """Async ``record``: the database write runs in a worker thread."""
        return await asyncio.to_thread(self.record, decision, **fields)

    def record_many(self, records: Sequence[ExecutionRecord], *, batch_size: int = 500
                    ) -> int:
        """Bulk-write records in batched transactions; returns how many were new."""
        written = 0
        for start in range(0, len(records), batch_size):
            chunk = records[start:start + batch_size]
            self.trust_layer.prefetch([(r.agent_id, r.task_type) for r in chunk])
            seqs = self.store.executions.record_many(chunk)
            written += self._apply_many([(rec, seq) for rec, seq in zip(chunk, seqs, strict=True)
                                         if seq is not None])
            self.trust_layer.maybe_flush()
        return written

    def _apply(self, rec: ExecutionRecord, seq: int) -> None:
        self._apply_many(((rec, seq),))

    def _apply_many(self, committed: Sequence[tuple[ExecutionRecord, int]]) -> int:
        """Fold committed records into the book one by one, then into the strategy
        (``observe_many``: no per-record strategy overhead in a bulk import) and the trust
        layer in one call each, under one lock round. What reached the book also reaches
        the strategy and the trust layer, even when a step raises. A strategy without
        ``observe_many`` observes as each record is applied. Returns how many."""
        book = self.book
        observe_many = getattr(self.strategy, "observe_many", None)
        done = 0
        with self._lock:
            try:
                for rec, seq in committed:
                    book.apply(rec, seq)
                    if observe_many is None:
                        self.strategy.observe(rec, seq, book)
                    done += 1
            finally:
                applied = committed if done == len(committed) else committed[:done]
                try:
                    if observe_many is not None and applied:
                        observe_many(applied, book)
                finally:
                    self.trust_layer.observe_many([rec for rec, _ in applied])
        return done

    # -- trust ---------------------------------------------------------------------
    def feedback(self, decision_id: str, approved: bool, comment: str | None = None
                 ) -> TrustScores:
        """A person's verdict on a decision: moves the chosen agent's human score."""
        return self.trust_layer.feedback(decision_id, approved, comment)

    async def afeedback(self, decision_id: str, approved: bool, comment: str | None = None
                        ) -> TrustScores:
        """Async ``feedback``: the database write runs in a worker thread."""
        return await asyncio.to_thread(self.feedback, decision_id, approved, comment)

    def review(self, agent_id: str, task_type: str, approved: bool,
               comment: str | None = None) -> TrustScores:
        """An explicit review of one (agent, task type) pair."""
        return self.trust_layer.review(agent_id, task_type, approved, comment)

    def signal(self, agent_id: str, task_type: str, name: str) -> TrustScores:
        """A named trust signal (``user_accepted``, ``pattern_contradicted``, ...)."""
        return self.trust_layer.signal(agent_id, task_type, name)

    def trust(self, agent_id: str, task_type: str) -> TrustScores:
        """Frequency, effectiveness and human scores, composite and tier of one pair."""
        return self.trust_layer.trust(agent_id, task_type)

    def flush(self) -> None:
        """Write buffered decision-log and trust updates now (``close`` also does)."""
        self.trust_layer.flush()

    def decay(self, *, now: datetime | None = None) -> DecayReport:
        """The weekly trust lifecycle (see router.lifecycle); idempotent per ISO week."""
        from trustroute.router.trust.lifecycle import run_decay

        return run_decay(self, now=now)

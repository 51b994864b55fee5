"""EvidenceLedger: discounted, pooled evidence kept incrementally for fast decisions.

A decision must cost microseconds, so nothing here walks a window per arm. Each task
type keeps numpy arrays (one slot per agent) of discounted sums: quality, success and
run weight. Discounting uses *reference frames*: a record of clock ``seq`` is stored
with weight ``2 ** ((seq - ref) / h)`` and read back multiplied by the type's current
``decay = 2 ** (-(clock - ref) / h)``, so ageing every agent's evidence when the clock
ticks costs one multiplication, and unchosen agents age exactly like chosen ones. The
frame is re-based before the exponent can overflow. Wall-time discounting uses one
global frame the same way.

For pooling, each agent also keeps its evidence summed across task types (at every
type's current decay), and the "expected" quality of that evidence under each type's
baseline; the agent's effect is their difference (see ``pooled_posterior``). These sums are
updated by vectorised deltas when a type's clock ticks: O(agents) numpy work per
record, O(arms) per decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import ProfileState, WindowEntry
from trustroute.router.strategies.posterior import halving, shrunk_mean

_WEIGHT = 2  # row of the run weights (after quality and success) in the evidence arrays
_REBASE_EXPONENT = 200.0  # re-base a frame before 2**exponent gets anywhere near overflow


@dataclass(slots=True)
class TypeEvidence:
    """One task type's discounted sums per agent, in the type's own clock frame."""

    sums: np.ndarray  # shape (3, capacity): stored quality, success, weight per agent
    ref: float  # the clock value the stored sums are relative to
    clock: int = 0  # highest execution clock seen for this type
    decay: float = 1.0  # 2 ** (-(clock - ref) / h): stored * decay = current value
    baseline: np.ndarray = field(default_factory=lambda: np.full(2, 0.5))
    """Mean quality and success rate of the type (all agents), shrunk to the global."""
    version: int = 0  # changes of this type's evidence (see ``EvidenceLedger.others_version``)


@dataclass(frozen=True, slots=True)
class EvidenceView:
    """Current evidence behind each arm of one decision (arrays aligned with arms)."""

    pair: np.ndarray  # (3, k) quality, success, weight of the (agent, task type) pair
    elsewhere: np.ndarray  # (3, k) the agent's evidence on every *other* task type
    expected: np.ndarray  # (2, k) what ``elsewhere`` would be at each type's baseline
    baseline: np.ndarray  # (2,) this task type's baseline quality and success rate


class EvidenceLedger:
    """Incremental discounted evidence per (agent, task type), per agent and overall."""

    def __init__(self, half_life_executions: float | None, half_life_seconds: float | None,
                 type_prior_strength: float) -> None:
        self.half_life_executions = half_life_executions
        self.half_life_seconds = half_life_seconds
        self.type_prior_strength = type_prior_strength
        self.clear()

    def clear(self) -> None:
        """Forget everything."""
        self._index: dict[str, int] = {}
        self._pairs: dict[str, list[str]] = {}  # agent -> its task types, first seen first
        self._capacity = 8
        self._types: dict[str, TypeEvidence] = {}
        self._agents = np.zeros((3, self._capacity))  # summed across types, current decay
        self._expected = np.zeros((2, self._capacity))  # sum of baseline x weight
        self._overall = np.zeros(3)  # everything, current decay (stored time frame)
        self._time_ref: float | None = None  # wall-time frame (POSIX seconds)
        # bumped on every change, for callers' caches; never reset, so never repeats
        self.version = getattr(self, "version", 0) + 1

    # -- indices ---------------------------------------------------------------------
    def _pair(self, agent_id: str, task_type: str) -> int:
        """The slot of ``agent_id``, noting that it has evidence on ``task_type``."""
        types = self._pairs.setdefault(agent_id, [])
        if task_type not in types:
            types.append(task_type)
        return self.index(agent_id)

    def index(self, agent_id: str) -> int:
        """The slot of ``agent_id`` (allocated on first sight)."""
        i = self._index.get(agent_id)
        if i is None:
            i = self._index[agent_id] = len(self._index)
            if i >= self._capacity:
                self._grow(max(2 * self._capacity, i + 1))
        return i

    def _grow(self, capacity: int) -> None:
        pad = capacity - self._capacity
        for te in self._types.values():
            te.sums = np.pad(te.sums, ((0, 0), (0, pad)))
        self._agents = np.pad(self._agents, ((0, 0), (0, pad)))
        self._expected = np.pad(self._expected, ((0, 0), (0, pad)))
        self._capacity = capacity

    def _type(self, task_type: str, clock: int) -> TypeEvidence:
        te = self._types.get(task_type)
        if te is None:
            te = self._types[task_type] = TypeEvidence(np.zeros((3, self._capacity)),
                                                       ref=float(clock), clock=clock)
            te.baseline = self._type_baseline(te)
        return te

    # -- frames ----------------------------------------------------------------------
    def _time_weight(self, timestamp: float) -> float:
        """Stored weight of a record at ``timestamp`` in the wall-time frame."""
        h = self.half_life_seconds
        if h is None:
            return 1.0
        if self._time_ref is None:
            self._time_ref = timestamp
        if (timestamp - self._time_ref) / h > _REBASE_EXPONENT:
            self._rebase_time(timestamp)
        return float(halving(self._time_ref - timestamp, h))

    def _rebase_time(self, new_ref: float) -> None:
        assert self.half_life_seconds is not None and self._time_ref is not None
        factor = float(halving(new_ref - self._time_ref, self.half_life_seconds))
        for te in self._types.values():
            te.sums *= factor
        self._agents *= factor
        self._expected *= factor
        self._overall *= factor
        self._time_ref = new_ref

    def time_factor(self, now: float) -> float:
        """Multiplier turning stored sums into their value at wall time ``now``."""
        if self._time_ref is None:
            return 1.0
        return float(halving(max(now - self._time_ref, 0.0), self.half_life_seconds))

    def _exec_decay(self, te: TypeEvidence) -> float:
        return float(halving(te.clock - te.ref, self.half_life_executions))

    def _type_baseline(self, te: TypeEvidence) -> np.ndarray:
        """Type mean quality and success, shrunk toward the global means."""
        overall = self._overall
        glob = (overall[:2] + 1.0) / (overall[2] + 2.0)  # uniform Beta(1, 1) prior
        totals = te.sums.sum(axis=1) * te.decay
        return shrunk_mean(totals[:2], totals[2], glob, self.type_prior_strength)

    # -- learning ----------------------------------------------------------------------
    def _detach(self, te: TypeEvidence) -> None:
        """Take one type's contribution out of the per-agent and overall sums."""
        current = te.sums * te.decay
        self._agents -= current
        self._expected -= np.outer(te.baseline, current[_WEIGHT])
        self._overall -= current.sum(axis=1)

    def _attach(self, te: TypeEvidence) -> None:
        """Put one type's contribution back, at its current decay and a fresh baseline."""
        current = te.sums * te.decay
        self._agents += current
        self._overall += current.sum(axis=1)
        te.baseline = self._type_baseline(te)
        self._expected += np.outer(te.baseline, current[_WEIGHT])
        self.version += 1
        te.version += 1

    def _stored_sums(self, te: TypeEvidence, entries: Sequence[WindowEntry]) -> np.ndarray:
        """Stored (quality, success, weight) sums of ``entries`` in ``te``'s frames."""
        sums = np.zeros(3)
        for e in entries:
            if e.quality is None:  # no quality evidence (pending a verdict, or ignored)
                continue
            w = float(halving(te.ref - e.seq, self.half_life_executions))
            w *= self._time_weight(e.timestamp)
            sums += (e.quality * w, float(e.success) * w, w)
        return sums

    def add(self, agent_id: str, task_type: str, entry: WindowEntry) -> None:
        """Fold one record in; ``entry.seq`` is its task type's clock value (an entry
        without quality evidence only moves the clock)."""
        self.amend(agent_id, task_type, None, entry)

    def amend(self, agent_id: str, task_type: str, old: WindowEntry | None,
              new: WindowEntry | None) -> None:
        """Replace one record's evidence ``old`` (None: none counted) by ``new`` (None:
        none), at its place (feedback changed its quality: docs/feedback.md)."""
        entry = new or old
        if entry is None:
            return
        i = self._pair(agent_id, task_type)
        te = self._type(task_type, entry.seq - 1)
        self._time_weight(entry.timestamp)  # re-base the wall-time frame first if needed
        self._detach(te)
        te.clock = max(te.clock, entry.seq)
        h = self.half_life_executions
        if h is not None and (te.clock - te.ref) / h > _REBASE_EXPONENT:
            te.sums *= self._exec_decay(te)
            te.ref = float(te.clock)
        te.decay = self._exec_decay(te)
        if old is not None:
            te.sums[:, i] = np.maximum(te.sums[:, i] - self._stored_sums(te, [old]), 0.0)
        if new is not None:
            te.sums[:, i] += self._stored_sums(te, [new])
        self._attach(te)

    def replace_pair(self, agent_id: str, task_type: str,
                     entries: Sequence[WindowEntry]) -> None:
        """Set one pair's evidence to exactly ``entries`` (used to forget pre-change runs)."""
        te = self._types.get(task_type)
        if te is None:
            return
        i = self.index(agent_id)
        self._detach(te)
        te.sums[:, i] = self._stored_sums(te, entries)
        self._attach(te)

    def rebuild(self, book: ProfileBook) -> None:
        """Recompute everything from a freshly loaded book (windows plus aggregates)."""
        self.clear()
        states = list(book)
        # a clock or a time behind its own records would weigh them above 1: take the max
        clocks: dict[str, int] = {}
        latest = 0.0
        for state in states:
            newest = max((e.seq for e in state.window), default=0)
            clocks[state.task_type] = max(clocks.get(state.task_type, 0), newest,
                                          book.clock(state.task_type))
            stamps = [e.timestamp for e in state.window]
            if state.last_updated is not None:
                stamps.append(state.last_updated.timestamp())
            latest = max([latest, *stamps])
        if self.half_life_seconds is not None:
            self._time_ref = latest
        for state in states:
            i = self._pair(state.agent_id, state.task_type)
            clock = clocks[state.task_type]
            te = self._type(state.task_type, clock)
            te.sums[:, i] = self._state_sums(state, clock, latest)
        for te in self._types.values():  # all new, at decay 1
            self._agents += te.sums
            self._overall += te.sums.sum(axis=1)
        for te in self._types.values():
            te.baseline = self._type_baseline(te)
            self._expected += np.outer(te.baseline, te.sums[_WEIGHT])
        self.version += 1

    def _state_sums(self, state: ProfileState, clock: int, latest: float) -> np.ndarray:
        """Discounted (quality, success, weight) of one profile at ``clock``/``latest``.

        The window holds the most recent records exactly. Older records are known only
        through the aggregates; they are assumed to continue the window's spacing in
        clock and time beyond its oldest entry, which makes their total weight a
        geometric series (tiny once the window spans a few half-lives).
        """
        entries = [e for e in state.window if e.quality is not None]
        h, ht = self.half_life_executions, self.half_life_seconds
        if entries:
            seqs = np.fromiter((e.seq for e in entries), float, len(entries))
            times = np.fromiter((e.timestamp for e in entries), float, len(entries))
            q = np.fromiter((e.quality for e in entries), float, len(entries))
            s = np.fromiter((e.success for e in entries), float, len(entries))
            expo = np.zeros(len(entries))
            if h is not None:
                expo += (clock - seqs) / h
            if ht is not None:
                expo += np.maximum(latest - times, 0.0) / ht
            w = np.exp2(-expo)
            out = np.array([q @ w, s @ w, w.sum()])
        else:
            out = np.zeros(3)
        older = state.executions_total - state.unjudged - len(entries)  # judged, not held
        if older > 0:
            q_old = max(state.quality_sum - float(sum(e.quality or 0.0 for e in entries)), 0.0)
            s_old = max(state.executions_successful - sum(e.success for e in entries), 0)
            if entries:
                span = max(len(entries) - 1, 1)
                step = 0.0
                if h is not None:
                    step += max((seqs.max() - seqs.min()) / span, 1.0) / h
                if ht is not None:
                    step += max((times.max() - times.min()) / span, 0.0) / ht
                first = float(expo.max())
            else:
                step, first = (1.0 / h if h is not None else 0.0), 0.0
            ratio = 2.0 ** (-step)
            tail = (older if ratio >= 1.0 else
                    2.0 ** (-first) * ratio * (1.0 - ratio ** older) / (1.0 - ratio))
            out += np.array([q_old / older, s_old / older, 1.0]) * tail
        return out

    # -- reading ----------------------------------------------------------------------
    def view(self, task_type: str, agent_ids: Sequence[str], now: float) -> EvidenceView:
        """Current evidence behind each of ``agent_ids`` for one decision."""
        idx = self.indices(agent_ids)
        pair, baseline = self.pair_view(task_type, idx, now)
        elsewhere, expected = self.elsewhere_view(task_type, idx, now)
        return EvidenceView(pair, elsewhere, expected, baseline)

    def indices(self, agent_ids: Sequence[str]) -> np.ndarray:
        """The slots of ``agent_ids`` (allocated on first sight), as an index array."""
        return np.fromiter(map(self.index, agent_ids), np.intp, len(agent_ids))

    def pair_view(self, task_type: str, idx: np.ndarray, now: float
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(3, k) current evidence of the pairs of slots ``idx`` on ``task_type``, and
        the type's baseline (quality, success)."""
        te = self._types.get(task_type)
        if te is None:
            overall = self._overall
            return np.zeros((3, len(idx))), (overall[:2] + 1.0) / (overall[2] + 2.0)
        pair = te.sums[:, idx]
        pair *= te.decay * (self.time_factor(now) if self._time_ref is not None else 1.0)
        return pair, te.baseline

    def elsewhere_view(self, task_type: str, idx: np.ndarray, now: float
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The evidence of slots ``idx`` on every task type but ``task_type`` (3, k), and
        what it would be at each of those types' baselines (2, k).

        It changes only when another task type's evidence does (``others_version``), so
        a caller may keep it while outcomes of ``task_type`` itself arrive.
        """
        te = self._types.get(task_type)
        agents = self._agents[:, idx]
        expected = self._expected[:, idx]
        if te is not None:  # take the type's own share out (current decay, no wall time)
            pair = te.sums[:, idx]
            pair *= te.decay
            agents -= pair
            expected -= te.baseline[:, None] * pair[_WEIGHT]
        if self._time_ref is not None:  # wall-time discounting: age everything to ``now``
            tf = self.time_factor(now)
            agents *= tf
            expected *= tf
        return np.maximum(agents, 0.0), expected

    def others_version(self, task_type: str) -> int:
        """A counter that changes whenever evidence of a task type other than
        ``task_type`` changes (it never repeats while the ledger lives)."""
        te = self._types.get(task_type)
        return self.version - (te.version if te is not None else 0)

    def prior_shares(self, task_type: str, idx: np.ndarray, strength: float,
                     coming: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Per slot of ``idx``: summed over every task type but ``task_type``, the share
        ``strength / (strength + n)`` of the agent's posterior there that rests on its
        pooled prior (``n``: its current evidence on that type, no wall time, plus
        ``coming[type]``: outcomes on their way there, aligned with ``idx``). What one
        of its outcomes teaches about the agent as a whole reaches those types this far.
        """
        out = np.zeros(len(idx))
        for other, te in self._types.items():
            if other != task_type:
                n = te.sums[_WEIGHT, idx] * te.decay
                if coming is not None and other in coming:
                    n = n + coming[other]
                out += strength / (strength + n)
        return out

    def task_types_of(self, agent_id: str) -> list[str]:
        """The task types ``agent_id`` has evidence on, in the order first seen."""
        return list(self._pairs.get(agent_id, ()))

    def typical_effect(self, shrink: float) -> np.ndarray:
        """A typical agent's effect (quality, success) relative to the type baselines.

        Each agent with evidence contributes its raw effect weighted by its reliability
        ``n / (n + shrink)``; one pseudo-agent at effect 0 keeps the estimate sane while
        few agents are known. Agents count once each, however often they were chosen,
        so this describes the population a new agent comes from, not the agents that
        happen to be chosen most.
        """
        # sum over agents of raw effect x reliability, with raw = (observed - expected)
        # / n and reliability = n / (n + shrink): (observed - expected) / (n + shrink).
        # Slots without evidence contribute nothing (their sums are 0).
        inv = 1.0 / (self._agents[_WEIGHT] + shrink)
        effect = (self._agents[:2] - self._expected) @ inv
        return np.asarray(effect / (self._agents[_WEIGHT] @ inv + 1.0))

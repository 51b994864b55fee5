"""The array math behind ``EvidenceLedger.add_many``: a batch of one task type at once.

Folding records one by one costs ~15 small numpy operations per record, almost all of
it call overhead on arrays of a few agents. A bulk import folds thousands, so each task
type of a batch is folded here in a few array passes, with the same result as repeated
``add`` up to float rounding. Two things make that less obvious than a sum:

- frames: a record is stored with weight ``2 ** ((seq - ref) / h)``, and ``add``
  re-bases the frame (``ref := clock``) whenever the clock gets 200 half-lives past
  ``ref``. Re-basing rescales stored sums without changing any current value, and the
  re-base points depend on the clocks alone, so they are found first and every weight
  is computed directly in the frame the type ends the batch in.
- baselines: ``add`` recomputes a type's baseline at each of its records from the
  evidence of *every* type at that moment, and the last one stays. So each type's
  final baseline is computed from every touched type's evidence as of that type's last
  record of the batch; running (prefix) sums give any type's totals at any position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from trustroute.router.strategies.posterior import halving, shrunk_mean

REBASE_EXPONENT = 200.0  # re-base a frame before 2**exponent gets anywhere near overflow


@dataclass(frozen=True, slots=True)
class TypeFold:
    """One task type after a batch, plus what it takes to read its totals mid-batch."""

    positions: np.ndarray  # block positions of the type's records, increasing
    sums: np.ndarray  # (3, capacity) stored sums after the batch, in the final frame
    ref: float  # the final frame
    clock: int
    decay: float
    before: np.ndarray  # (3,) current totals (all agents) before the batch
    carried: np.ndarray  # (3,) stored totals from before the batch, in the final frame
    running: np.ndarray  # (3, n) the batch's stored totals after each record, final frame
    clocks: np.ndarray  # (n,) the type's clock after each record
    half_life: float | None

    def totals_at(self, positions: np.ndarray) -> np.ndarray:
        """Current totals (quality, success, weight) as of each block position."""
        done = np.searchsorted(self.positions, positions, side="right")
        out = np.repeat(self.before[:, None], len(positions), axis=1)
        seen = done > 0
        if seen.any():
            last = done[seen] - 1
            decay = halving(self.clocks[last] - self.ref, self.half_life)
            out[:, seen] = (self.carried[:, None] + self.running[:, last]) * decay
        return out


def rebased_ref(ref: float, clocks: np.ndarray, half_life: float | None) -> float:
    """The frame ``add`` would end in after seeing ``clocks`` (its re-base rule)."""
    if half_life is None or not ((clocks - ref) / half_life > REBASE_EXPONENT).any():
        return ref
    for clock in clocks.tolist():  # rare (every 200 half-lives): the exact rule, in order
        if (clock - ref) / half_life > REBASE_EXPONENT:
            ref = float(clock)
    return ref


def fold_type(sums: np.ndarray, ref: float, clock: int, decay: float, positions: np.ndarray,
              slots: np.ndarray, quality: np.ndarray, success: np.ndarray, seqs: np.ndarray,
              clocks: np.ndarray, time_weights: np.ndarray, half_life: float | None
              ) -> TypeFold:
    """Fold one type's records of a block (arrays aligned with ``positions``).

    ``sums``/``ref``/``clock``/``decay`` are the type's state before the block;
    ``clocks`` are the clocks ``add`` would have been given; ``time_weights`` the
    records' weights in the (fixed) wall-time frame.
    """
    after = np.maximum.accumulate(np.maximum(np.maximum(clocks, seqs), clock))
    new_ref = rebased_ref(ref, after, half_life)
    new_clock = int(after[-1])
    scale = float(halving(new_ref - ref, half_life))
    weights = halving(new_ref - seqs.astype(float), half_life) * time_weights
    rows = np.stack((quality * weights, success * weights, weights))
    new_sums = sums * scale
    for r in range(3):
        new_sums[r] += np.bincount(slots, weights=rows[r], minlength=new_sums.shape[1])
    stored = sums.sum(axis=1)
    return TypeFold(positions=positions, sums=new_sums, ref=new_ref, clock=new_clock,
                    decay=float(halving(new_clock - new_ref, half_life)),
                    before=stored * decay, carried=stored * scale,
                    running=np.cumsum(rows, axis=1), clocks=after, half_life=half_life)


def final_baselines(rest: np.ndarray, folds: Sequence[TypeFold],
                    type_prior_strength: float) -> np.ndarray:
    """(2, types) baseline of each folded type, as ``add`` leaves it.

    ``rest`` is the overall evidence of every type *not* in the batch. Type v's
    baseline is taken at its last record: its own totals then, shrunk toward the global
    mean of ``rest`` plus every folded type's totals at that same moment.
    """
    lasts = np.array([fold.positions[-1] for fold in folds])
    totals = [fold.totals_at(lasts) for fold in folds]  # each (3, types)
    overall = rest[:, None] + np.sum(totals, axis=0)
    glob = (overall[:2] + 1.0) / (overall[2] + 2.0)  # uniform Beta(1, 1) prior
    own = np.stack([totals[v][:, v] for v in range(len(folds))], axis=1)
    return np.asarray(shrunk_mean(own[:2], own[2], glob, type_prior_strength))

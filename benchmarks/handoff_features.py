"""Hand-off candidates measured against the calibrated rule: features beyond the top score.

The library's calibrated rule (``RetrievalConfidence.calibrate``) cuts on the reference
formula, which with top-k retrieval orders queries by their best score alone. These
candidates combine more of what a retrieval returns, and are measured beside it in
``handoff_banking77`` on the same held-out queries. They are not used by the library:
``docs/handoff.md`` says what they showed and why none was adopted.

Features of one query's top-k scores (sorted, best first): the top score, the gap between
the first two, the mean and the spread (standard deviation) of the top k; optionally the
agreement among the top hits (share of the top k from the same source as the best hit:
in BANKING77 the intent of the knowledge-base entry), which the scores alone do not carry.

Each candidate is a logistic rule fitted on the calibration sample only: a ridge-penalised
logistic regression on standardised features (a standard-normal prior on each weight,
chosen before any measurement, not tuned), whose log-odds of "covered" is the combined
score. The cut is placed exactly as the library places its own: at the split-conformal rank
of the needs-human cases' combined scores (the smallest k with k / (P + 1) >= target;
``required_rank``), midway to the next score above, or in the middle of the gap when the
sample separates. So the candidates aim at the same target recall with the same
correction; only the score that is cut differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from trustroute.router.handoff.calibration import cut_at_rank, required_rank

Floats = NDArray[np.float64]
Flags = NDArray[np.bool_]
RIDGE = 1.0  # precision of the N(0, 1) prior on each standardised weight (not tuned)


def features(scores: Floats, agreement: Floats | None = None) -> Floats:
    """Per query: top score, top1 - top2 gap, mean and spread of the top k [, agreement].

    ``scores``: one row per query, best first. ``agreement``: share of each query's top-k
    hits from the best hit's source (None: left out).
    """
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must be a 2-D array with >= 2 hits per row, got {scores.shape}")
    columns = [scores[:, 0], scores[:, 0] - scores[:, 1], scores.mean(1), scores.std(1)]
    if agreement is not None:
        columns.append(agreement)
    return np.column_stack(columns)


def _fit_logistic(x: Floats, y: Flags) -> tuple[Floats, Floats, Floats]:
    """(mean, scale, weights) of a ridge-penalised logistic regression by Newton steps."""
    mean, scale = x.mean(0), x.std(0)
    scale = np.where(scale > 0, scale, 1.0)
    z = np.column_stack([np.ones(len(x)), (x - mean) / scale])
    prior = RIDGE * np.eye(z.shape[1])
    prior[0, 0] = 0.0  # the intercept is not penalised
    w = np.zeros(z.shape[1])
    target = y.astype(float)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-z @ w))
        grad = z.T @ (p - target) + prior @ w
        hess = z.T @ (z * (p * (1.0 - p))[:, None]) + prior
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return mean, scale, w


def conformal_cut(values: Floats, needs: Flags, target_recall: float) -> float:
    """Transfer below this: the library's rule (conformal rank, widest margin) on ``values``."""
    return cut_at_rank(values, needs, required_rank(int(needs.sum()), target_recall),
                       1e-9, np.inf)


@dataclass(frozen=True)
class LogisticRule:
    """A combined score (log-odds of "covered") and the cut calibrated on it."""

    mean: Floats
    scale: Floats
    weights: Floats
    cut: float

    @classmethod
    def fit(cls, x: Floats, needs: Flags, target_recall: float) -> LogisticRule:
        """Fit on the calibration sample's features and labels; cut at the conformal rank."""
        if needs.all() or not needs.any():
            raise ValueError("the calibration sample needs both needs-human and covered cases")
        mean, scale, weights = _fit_logistic(x, ~needs)
        rule = cls(mean, scale, weights, 0.0)
        return cls(mean, scale, weights, conformal_cut(rule.score(x), needs, target_recall))

    def score(self, x: Floats) -> Floats:
        """Combined score: higher means more likely covered."""
        z = (x - self.mean) / self.scale
        return np.asarray(self.weights[0] + z @ self.weights[1:], dtype=float)

    def transfers(self, x: Floats) -> Flags:
        """Which queries go to a person."""
        return self.score(x) < self.cut


def matched_false_rate(score: Floats, needs: Flags, recall: float) -> float:
    """False transfers of the best cut on ``score`` reaching ``recall`` on these queries
    (higher score: covered); compares scores at the same held-out recall."""
    cut = np.sort(score[needs])[int(np.ceil(recall * needs.sum())) - 1]
    return float((score[~needs] <= cut).mean())

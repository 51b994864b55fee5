"""Composite trust per (agent, task type): frequency, effectiveness, human approval.

Counting executions says how often an agent was used, not whether it helped or whether
people agree with it. Three scores, each in [0, 1], answer the three questions:

- ``frequency_score``: how much evidence there is (banded observation count), minus a
  penalty per *contradiction* (the agent failed and another agent rescued the task);
- ``effectiveness_score``: the Wilson 95% lower bound of the positive rate, so a short
  lucky streak does not look like proven skill;
- ``human_score``: what people said: the reference update while verdicts are few, the
  approval rate's Wilson lower bound at volume (an explicit approving review pins it
  at 0.95).

``composite_confidence`` weighs them (0.35 / 0.40 / 0.25 by default) and multiplies by
0.7 when any dimension is below 0.2 (one very weak dimension is a red flag a weighted
mean would hide); ``tier_for`` names the band; ``trust_scores`` does all of it for one
pair's ``TrustCounts``. The named signals and how executions, feedback and reviews
change the counts (as ``TrustDelta``s) are here too; the weekly decay math is in
``trustroute.router.trust.decay``. Everything here is pure arithmetic over counts: the
store and the trust layer keep the counts, this module turns them into scores.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from trustroute.profiles.records import check_finite
from trustroute.profiles.trust_counts import Counters, TrustCounts, TrustDelta
from trustroute.router.stats import Z95, wilson_lower_bound

DEFAULT_WEIGHTS: tuple[float, float, float] = (0.35, 0.40, 0.25)
WEAK_DIMENSION = 0.2  # a dimension below this triggers the penalty
WEAK_PENALTY = 0.7  # composite multiplier when any dimension is weak
CONTRADICTION_PENALTY = 0.1
#: Scores are decimals (0.3 - 0.1 = 0.2); binary floats make that 0.19999999999999998,
#: below the 0.2 edge. Scores are rounded to this many places, far below any real step.
DECIMALS = 12
NEUTRAL_SCORE = 0.5  # effectiveness and human score with no evidence
REVIEWED_SCORE = 0.95  # human score after an explicit approving review
HUMAN_STEP = 0.15  # the reference: each approval closes 15% of the gap to 1; rejection 15%
POSITIVE_QUALITY = 0.5  # a success counts as positive at this quality or above

# (upper bound of observations, base score), lowest first.
FREQUENCY_BANDS: tuple[tuple[float, float], ...] = (
    (2, 0.30), (5, 0.50), (10, 0.70), (20, 0.85), (math.inf, 0.95))


class Tier(StrEnum):
    """How an (agent, task type) pair may be used; compares equal to its name."""

    CORE = "core"
    STRONG = "strong"
    MODERATE = "moderate"
    TENTATIVE = "tentative"
    DEPRECATED = "deprecated"


#: A composite below this is the deprecated tier (and what the lifecycle marks, by default).
DEPRECATED_BELOW = 0.2
# (lower edge, tier), highest first: core [0.8, 1], strong [0.6, 0.8), ...
TIER_EDGES: tuple[tuple[float, Tier], ...] = (
    (0.8, Tier.CORE), (0.6, Tier.STRONG), (0.4, Tier.MODERATE),
    (DEPRECATED_BELOW, Tier.TENTATIVE), (0.0, Tier.DEPRECATED),
)


def _count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer count, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def check_unit(value: float, name: str) -> float:
    """A number within [0, 1] (NaN rejected), or an error naming ``name``."""
    return check_finite(value, name, low=0.0, high=1.0)


def frequency_score(observations: int, contradictions: int = 0) -> float:
    """Banded evidence count minus 0.1 per contradiction, floored at 0.

    0.30 for up to 2 observations (a profile never observed starts in the lowest band,
    which keeps a new profile ``moderate`` overall), 0.50 for 3-5, 0.70 for 6-10, 0.85
    for 11-20, 0.95 above.
    """
    n = _count(observations, "observations")
    k = _count(contradictions, "contradictions")
    base = next(score for upper, score in FREQUENCY_BANDS if n <= upper)
    return max(0.0, round(base - CONTRADICTION_PENALTY * k, DECIMALS))


def effectiveness_score(positive: int, negative: int, neutral: int = 0) -> float:
    """Wilson 95% lower bound of positive / total (0.5 with no data), in [0, 1].

    Neutral executions (successful but below quality 0.5) count in the total but not as
    positive: they neither prove nor disprove the agent's worth, so they dilute.
    """
    pos = _count(positive, "positive")
    total = pos + _count(negative, "negative") + _count(neutral, "neutral")
    if total == 0:
        return NEUTRAL_SCORE
    return wilson_lower_bound(pos / total, total, Z95)


def human_score(approvals: int, rejections: int, reviewed: bool = False) -> float:
    """What people said: 0.95 after an explicit approving review; else the reference
    update handing over to the Wilson 95% lower bound of the approval rate as verdicts
    accumulate.

    ``h = w x reference + (1 - w) x wilson(a / n, n)`` with ``n = a + r`` verdicts and
    ``w = 0.85 ** n``: the share of the reference's own score that is still its starting
    belief (each of its steps keeps 85% of what was there). The reference
    (``reference_human_score``: 0.5, each approval closing 15% of the gap to 1, then each
    rejection taking 15%) speaks while it is mostly its prior, i.e. while verdicts are
    few. Once it is mostly evidence it weighs that evidence by compounding steps, which
    collapse at volume (180 of 200 approved: 0.039) at the same geometric pace, so it
    hands over at that pace to the approval rate's lower bound: 90% of 200 scores 0.85,
    20% 0.15. The bound is the evidence standard ``effectiveness_score`` uses: trust is
    earned by what the verdicts show with 95% confidence, so a few verdicts move the
    score down more readily than up (one approval 0.52, one rejection 0.36, 3 of 6
    approved 0.28). Both parts are functions of the counts, so the order verdicts arrive
    in does not matter.
    """
    a = _count(approvals, "approvals")
    r = _count(rejections, "rejections")
    if reviewed:
        return REVIEWED_SCORE
    n = a + r
    w = (1.0 - HUMAN_STEP) ** n
    rate = wilson_lower_bound(a / n, n, Z95) if n else NEUTRAL_SCORE
    return w * reference_human_score(a, r) + (1.0 - w) * rate


def reference_human_score(approvals: int, rejections: int) -> float:
    """The reference update: approvals then rejections applied to 0.5 (``s += 0.15(1 -
    s)``, then ``s -= 0.15 s``); 2 approvals and 1 rejection give 0.5429375. The steps
    compose into powers, so the cost does not grow with the counts."""
    keep = 1.0 - HUMAN_STEP  # n approvals leave keep**n of the gap to 1; rejections of s
    return (1.0 - (1.0 - NEUTRAL_SCORE) * keep ** approvals) * keep ** rejections


def composite_confidence(frequency: float, effectiveness: float, human: float,
                         weights: tuple[float, float, float] = DEFAULT_WEIGHTS) -> float:
    """Weighted sum of the three scores, x0.7 if any is below 0.2, clamped to [0, 1]."""
    scores = (check_unit(frequency, "frequency"), check_unit(effectiveness, "effectiveness"),
              check_unit(human, "human"))
    w = check_weights(weights)
    value = sum(wi * si for wi, si in zip(w, scores, strict=True))
    if min(scores) < WEAK_DIMENSION:
        value *= WEAK_PENALTY
    return min(1.0, max(0.0, round(value, DECIMALS)))


def check_weights(weights: tuple[float, float, float]) -> tuple[float, float, float]:
    """Three finite, non-negative weights (frequency, effectiveness, human)."""
    if len(weights) != 3 or any(not math.isfinite(x) or x < 0 for x in weights):
        raise ValueError(f"weights must be three finite numbers >= 0 (frequency, "
                         f"effectiveness, human), got {weights}")
    return weights


def tier_for(composite: float) -> Tier:
    """core [0.8, 1], strong [0.6, 0.8), moderate [0.4, 0.6), tentative [0.2, 0.4),
    deprecated [0, 0.2)."""
    c = check_unit(composite, "composite")
    return next(tier for edge, tier in TIER_EDGES if c >= edge)


def outcome_kind(success: bool, quality: float) -> str:
    """``positive`` (success with quality >= 0.5), ``negative`` (failure) or ``neutral``."""
    if not success:
        return "negative"
    return "positive" if quality >= POSITIVE_QUALITY else "neutral"


class TrustScores(NamedTuple):
    """The three scores of one pair, their composite and tier.

    A named tuple, so ``f, e, h, c, tier = router.trust(agent, task_type)`` works as
    well as attribute access.
    """

    frequency: float
    effectiveness: float
    human: float
    composite: float
    tier: Tier

    def as_dict(self) -> dict[str, float | str]:
        """JSON-ready form."""
        return {**self._asdict(), "tier": str(self.tier)}


def trust_scores(counts: TrustCounts,
                 weights: tuple[float, float, float] = DEFAULT_WEIGHTS) -> TrustScores:
    """A pair's three scores after its decay offsets (each floored at 0), composite, tier."""
    f = max(0.0, round(frequency_score(counts.observations, counts.contradictions)
                       - counts.frequency_decay, DECIMALS))
    e = max(0.0, round(effectiveness_score(counts.positive, counts.negative, counts.neutral)
                       - counts.effectiveness_decay, DECIMALS))
    h = max(0.0, round(human_score(counts.approvals, counts.rejections, counts.reviewed)
                       - counts.human_decay, DECIMALS))
    c = composite_confidence(f, e, h, weights)
    return TrustScores(f, e, h, c, tier_for(c))


# -- evidence ------------------------------------------------------------------------
class SignalEffect(NamedTuple):
    """What one named signal adds to the counts, and why."""

    counts: Counters
    meaning: str


# The named signals of the reference design, mapped onto the counts behind the formulas.
SIGNALS: dict[str, SignalEffect] = {
    "pattern_observed_again": SignalEffect(
        Counters(observations=1), "seen on this task type again: frequency evidence only"),
    "applied_successfully": SignalEffect(
        Counters(observations=1, positive=1), "an execution that worked (like a positive run)"),
    "causal_link_confirmed": SignalEffect(
        Counters(positive=1), "a good outcome confirmed to be the agent's doing"),
    "user_accepted": SignalEffect(Counters(approvals=1), "a user accepted the result"),
    "reflect_approved": SignalEffect(Counters(approvals=1), "a reflection step approved it"),
    "pattern_contradicted": SignalEffect(
        Counters(contradictions=1), "another agent had to rescue the task"),
    "applied_failed": SignalEffect(
        Counters(observations=1, negative=1), "an execution that failed (like a failed run)"),
    "user_corrected": SignalEffect(Counters(rejections=1), "a user had to correct the result"),
    "reflect_rejected": SignalEffect(Counters(rejections=1), "a reflection step rejected it"),
}


def signal_delta(agent_id: str, task_type: str, name: str, at: datetime) -> TrustDelta:
    """What one named signal adds to a pair (fresh evidence seen ``at``).

    A rejection withdraws an earlier explicit approval: the approval stands only until
    someone disagrees.
    """
    try:
        counts = SIGNALS[name].counts
    except KeyError:
        raise ValueError(f"unknown trust signal {name!r}; known: "
                         f"{', '.join(sorted(SIGNALS))}") from None
    return TrustDelta(agent_id, task_type, **asdict(counts),
                      reviewed=False if counts.rejections else None, at=at)


def execution_delta(agent_id: str, task_type: str, kind: str, at: datetime) -> TrustDelta:
    """One recorded execution of ``kind`` (see ``outcome_kind``): one observation and one
    positive, negative or neutral, seen ``at`` (``unjudged``, a run without quality
    evidence yet: the observation only)."""
    return TrustDelta(agent_id, task_type, observations=1, positive=int(kind == "positive"),
                      negative=int(kind == "negative"), neutral=int(kind == "neutral"),
                      at=at)


def verdict_delta(agent_id: str, task_type: str, approved: bool, at: datetime, *,
                  review: bool) -> TrustDelta:
    """A person's verdict: one approval or rejection. An approving explicit ``review``
    pins the human score at 0.95; any rejection withdraws such an approval."""
    return TrustDelta(agent_id, task_type, approvals=int(approved),
                      rejections=int(not approved),
                      reviewed=(True if review else None) if approved else False,
                      at=at)


def human_delta(agent_id: str, task_type: str, approvals: int, rejections: int,
                at: datetime | None) -> TrustDelta:
    """Approvals and rejections a verdict on an execution adds (negative: a later
    verdict on the same key replaced it); a rejection withdraws an approving review."""
    return TrustDelta(agent_id, task_type, approvals=approvals, rejections=rejections,
                      reviewed=False if rejections > 0 else None, at=at)


def kind_delta(agent_id: str, task_type: str, old: str | None, new: str | None,
               at: datetime | None) -> TrustDelta:
    """An execution's outcome kind moved from ``old`` to ``new`` (None: no quality
    evidence; feedback changed its quality). Its observation stays."""
    def moved(kind: str) -> int:
        return int(kind == new) - int(kind == old)

    return TrustDelta(agent_id, task_type, positive=moved("positive"),
                      negative=moved("negative"), neutral=moved("neutral"), at=at)

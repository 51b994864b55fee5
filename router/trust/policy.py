"""Tier routing policy: which candidates a decision may choose, given their trust tiers.

- deprecated pairs are not selected (the lifecycle retires them later);
- in exploit-only mode, when some candidate is ``core`` or ``strong``, only those are
  chosen automatically (production traffic goes to proven agents);
- deprecation waits for a complete record: a pair with fewer than
  ``new_profile_observations`` observations (20, where a profile's confidence
  ``min(1, n/20)`` is full) is not excluded as deprecated. Exclusion is final in
  practice (a pair that is never chosen gets no evidence that could lift it again), and
  a few runs can put a good agent below 0.2: one approval in three verdicts gives a
  composite of 0.19. Until then the learning strategy, which can come back to an agent,
  decides (exploit-only mode, which explores nothing, still prefers proven agents).

Candidates that are not admitted stay in the decision, ranked last with the reason.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from trustroute.profiles.profile import CONFIDENCE_RAMP
from trustroute.router.decision import CandidateScore
from trustroute.router.errors import NoAgentAvailable
from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.scores import Tier
from trustroute.router.trust.settings import Settings

TRUSTED = (Tier.CORE, Tier.STRONG)


class TierPolicy(Settings):
    """How trust tiers restrict the candidates of a decision (config ``trust.policy``)."""

    exclude_deprecated: bool = True
    exploit_trusted_only: bool = True
    new_profile_observations: int = Field(default=CONFIDENCE_RAMP, ge=0)

    def admit(self, task_type: str, ranked: list[CandidateScore], book: TrustBook,
              exploit_only: bool) -> list[CandidateScore]:
        """``ranked`` with the candidates this policy does not admit moved last, their
        reason saying why. Raises NoAgentAvailable when none is admitted."""
        exclude = self.exclude_deprecated and book.deprecated_pairs > 0
        trusted_only = exploit_only and self.exploit_trusted_only
        if not exclude and not trusted_only:
            return ranked  # the common case: nothing to look up
        tiers = [book.scores(c.agent_id, task_type).tier for c in ranked]
        why = ["not selected: trust tier deprecated" if exclude and t is Tier.DEPRECATED and
               book.counts(c.agent_id, task_type).observations >= self.new_profile_observations
               else None for c, t in zip(ranked, tiers, strict=True)]
        if trusted_only and any(
                w is None and t in TRUSTED for w, t in zip(why, tiers, strict=True)):
            why = [w if w is not None or t in TRUSTED else
                   f"not selected: exploit-only mode uses core/strong agents (tier {t})"
                   for w, t in zip(why, tiers, strict=True)]
        if all(w is not None for w in why):
            raise NoAgentAvailable(task_type, f"all {len(ranked)} eligible agent(s) are in "
                                              "the deprecated trust tier (with "
                                              "trust.policy.exclude_deprecated: false they "
                                              "are routed to anyway)")
        kept = [c for c, w in zip(ranked, why, strict=True) if w is None]
        return kept + [replace(c, note=w) for c, w in zip(ranked, why, strict=True) if w]

"""Tier routing policy: which candidates a decision may choose, given their trust tiers.

- deprecated pairs are not selected (the lifecycle retires them later);
- in exploit-only mode, when some candidate is ``core`` or ``strong``, only those are
  chosen automatically (production traffic goes to proven agents);
- tiers never block exploration of a new profile: a pair with fewer than
  ``new_profile_observations`` observations (3: still in the lowest frequency band,
  where one unlucky run decides the tier) is always admitted.

Candidates that are not admitted stay in the decision, ranked last with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.scores import Tier

TRUSTED = (Tier.CORE, Tier.STRONG)


@dataclass(frozen=True, slots=True)
class TierPolicy:
    """How trust tiers restrict the candidates of a decision (configurable)."""

    exclude_deprecated: bool = True
    exploit_trusted_only: bool = True
    new_profile_observations: int = 3

    def __post_init__(self) -> None:
        if self.new_profile_observations < 0:
            raise ValueError("trust.policy.new_profile_observations must be >= 0")

    def admit(self, agent_ids: Sequence[str], task_type: str, book: TrustBook,
              exploit_only: bool) -> list[int] | None:
        """Indices of the admitted candidates, or None when every one is admitted.

        An empty list means every candidate is deprecated (the caller says so).
        """
        exclude = self.exclude_deprecated and book.deprecated_pairs > 0
        trusted_only = exploit_only and self.exploit_trusted_only
        if not exclude and not trusted_only:
            return None  # the common case costs two attribute reads
        tiers = [book.tier(a, task_type) for a in agent_ids]
        keep = list(range(len(agent_ids)))
        if exclude:
            keep = [i for i in keep if tiers[i] is not Tier.DEPRECATED
                    or book.observations(agent_ids[i], task_type)
                    < self.new_profile_observations]
        if trusted_only:
            trusted = [i for i in keep if tiers[i] in TRUSTED]
            if trusted:
                keep = trusted
        return None if len(keep) == len(agent_ids) else keep

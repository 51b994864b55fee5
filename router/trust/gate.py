"""The trust gate on a decision's path: the tier policy admits candidates, the
calibrated confidence and the abstention gates judge the first one, and an abstention is
carried out (docs/trust.md, "Inside the router").

``AgentRouter.select`` calls ``admit``, ``judge`` and ``settle``; none of them waits on
the database, except that ``on_abstain: human`` stores the hand-off request as pending on
the caller's thread (so it survives a crash once ``select()`` returned) before a worker
thread delivers it. What the gate reads (the trust counts, the calibration map) is
folded from the log by the ``TrustLayer``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from trustroute.router.decision import CandidateScore, RoutingDecision
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest
from trustroute.router.handoff.transfer.hook import hook_name, passthrough_of
from trustroute.router.handoff.worker import HandoffWorker
from trustroute.router.trust.abstention import Abstained, AbstentionPolicy, GateView
from trustroute.router.trust.book import TrustBook
from trustroute.router.trust.decision_log import DecisionLog
from trustroute.router.trust.options import TrustOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TrustVerdict:
    """How sure the router is of a ranking's first candidate (``TrustGate.judge``)."""

    confidence: float  # calibrated probability that the chosen agent succeeds
    tier: str  # weak, medium or strong
    abstained: bool
    abstain_reason: str | None  # the name of the gate that fired
    detail: str | None  # that gate's explanation
    raw: float  # the strategy's success estimate before calibration


class TrustGate:
    """Tiers on the way in, calibrated confidence and abstention on the way out."""

    def __init__(self, book: TrustBook, decisions: DecisionLog, options: TrustOptions,
                 abstention: AbstentionPolicy, transfer: TransferDispatcher | None = None,
                 *, exploit_only: bool = False) -> None:
        self.book = book  # the trust counts, folded by the trust layer
        self.decisions = decisions  # the decision log and its calibration map
        self.options = options
        self.abstention = abstention
        self.transfer = transfer  # where ``on_abstain: human`` hands decisions over
        self.exploit_only = exploit_only  # the tier policy's mode
        self._handoffs = HandoffWorker(transfer)  # hooks may do network I/O: on a worker
        pausing = [hook_name(h) for h in transfer.hooks if passthrough_of(h)] if \
            transfer is not None and abstention.on_abstain == "human" else []
        if pausing:
            log.warning("on_abstain: human hands an abstention over on a background worker, "
                        "where hook(s) %s cannot run (they pause their caller, such as a "
                        "LangGraph graph): abstentions skip them", ", ".join(pausing))

    def admit(self, task_type: str, ranked: list[CandidateScore]) -> list[CandidateScore]:
        """``ranked`` with the candidates the tier policy does not admit moved last
        (their reason says why), so the first is admitted and nobody is hidden.
        Raises NoAgentAvailable when no candidate is admitted."""
        return self.options.policy.admit(task_type, ranked, self.book, self.exploit_only)

    def judge(self, task_type: str, ranked: Sequence[CandidateScore]) -> TrustVerdict:
        """Calibrated confidence in the first candidate, its tier and the abstention
        gates' verdict (pure: nothing is buffered)."""
        first = ranked[0].success_probability if ranked else None
        raw = self.options.unknown_probability if first is None else min(1.0, max(0.0, first))
        calibrate = self.decisions.calibration
        confidence = calibrate(raw)
        fired = self.abstention.evaluate(GateView(task_type, ranked, calibrate, confidence))
        reason, detail = fired if fired is not None else (None, None)
        return TrustVerdict(confidence, self.options.confidence_tiers.tier_of(confidence),
                            fired is not None, reason, detail, raw)

    def settle(self, decision: RoutingDecision, verdict: TrustVerdict) -> None:
        """Buffer the decision for the log; carry out ``on_abstain`` when it abstained
        (``raise`` raises Abstained)."""
        self.decisions.remember(decision, verdict.raw, verdict.detail)
        if not verdict.abstained:
            return
        detail = verdict.detail or ""
        if self.abstention.on_abstain == "raise":
            decision.release()
            raise Abstained(decision, detail)
        if self.abstention.on_abstain != "human":
            return
        if self.transfer is None:
            log.warning("on_abstain is 'human' but the router has no transfer dispatcher; "
                        "decision %s routed anyway", decision.decision_id)
            return
        # not to hooks that pause their caller: the worker is no caller (see __init__)
        hooks = [h for h in self.transfer.hooks if not passthrough_of(h)]
        request = self.transfer.accept(TransferRequest.from_decision(  # stored first
            decision, reason=f"{decision.abstain_reason}: {detail}" if detail else None),
            hooks)
        if hooks:
            self._handoffs.submit(self.transfer, request, hooks)

    def close(self) -> None:
        """Give hand-offs in flight ``dispatch_close_timeout_s`` and stop their worker
        (idempotent); undelivered ones stay pending (``trustroute handoffs --retry``)."""
        self._handoffs.close(0.0 if self.transfer is None
                             else self.transfer.settings.dispatch_close_timeout_s)

"""What people and signals say about agents, as ``AgentRouter`` methods: verdicts on
executions (``feedback``; docs/feedback.md), reviews and signals of a pair, the trust
scores they move, and the trust layer's flush and weekly lifecycle (docs/trust.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, cast
from uuid import UUID

from trustroute.profiles.records import check_identifier
from trustroute.router.async_twin import in_thread
from trustroute.router.feedback import giving
from trustroute.router.feedback.policy import FeedbackPolicy
from trustroute.router.trust.lifecycle import DecayReport, run_decay
from trustroute.router.trust.scores import TrustScores

if TYPE_CHECKING:
    from trustroute.profiles.store import Store
    from trustroute.router.projection import LogProjection
    from trustroute.router.router import AgentRouter
    from trustroute.router.trust.layer import TrustLayer


def check_pair(agent_id: str, task_type: str) -> None:
    """A one-line error naming the argument when either is not a usable identifier."""
    check_identifier(agent_id, "agent_id")
    check_identifier(task_type, "task_type")


class TrustMethods:
    """``AgentRouter``'s trust methods (the router provides the attributes below)."""

    store: Store
    trust_layer: TrustLayer
    projection: LogProjection
    feedback_policy: FeedbackPolicy
    check_agent: Callable[[str], None]

    def feedback(self, ref: str | UUID, approved: bool | None = None,
                 comment: str | None = None, *, score: float | None = None,
                 key: str = "user", feedback_id: str | None = None) -> TrustScores:
        """A verdict on one execution, by decision id, record id or LangChain run id
        (LangChain's UUID as it is, or its text); exactly one of ``approved`` and
        ``score``. Appended under ``feedback_id`` (the same id twice counts once); every
        router folds it. docs/feedback.md."""
        ref = str(ref) if isinstance(ref, UUID) else ref
        giving.check_verdict(self.feedback_policy, approved, score, key, comment, feedback_id)
        target = giving.resolve(ref, self.projection.feedback, self.store.executions,
                                self.trust_layer.decisions)
        self.check_agent(target.agent_id)
        row = giving.verdict_row(target, ref, approved, score, key, comment)
        scores = self.trust_layer.give(row, feedback_id or giving.new_feedback_id())[0]
        self.projection.recall()  # an execution folded too long ago: a rebuild amends it
        return scores

    afeedback = in_thread(feedback)

    def review(self, agent_id: str, task_type: str, approved: bool,
               comment: str | None = None) -> TrustScores:
        """An explicit review of one (agent, task type) pair."""
        self.check_agent(check_identifier(agent_id, "agent_id"))  # a bad id: its error only
        return self.trust_layer.review(agent_id, task_type, approved, comment)

    areview = in_thread(review)

    def signal(self, agent_id: str, task_type: str, name: str) -> TrustScores:
        """A named trust signal (``user_accepted``, ``pattern_contradicted``, ...)."""
        self.check_agent(check_identifier(agent_id, "agent_id"))
        return self.trust_layer.signal(agent_id, task_type, name)

    asignal = in_thread(signal)

    def trust(self, agent_id: str, task_type: str) -> TrustScores:
        """Frequency, effectiveness and human scores, composite and tier of one pair."""
        check_pair(agent_id, task_type)
        return self.trust_layer.book.scores(agent_id, task_type)

    atrust = in_thread(trust)

    def flush(self) -> None:
        """Write buffered decision-log and trust updates now (``close`` also does)."""
        self.trust_layer.flush()

    aflush = in_thread(flush)

    def decay(self, *, now: datetime | None = None) -> DecayReport:
        """The weekly trust lifecycle (see router.trust.lifecycle); idempotent per ISO week."""
        return run_decay(cast("AgentRouter", self), now=now)

    adecay = in_thread(decay)

"""Late, partial verdicts on executions: the policy, the verdicts folded per execution,
and ``router.feedback`` (docs/feedback.md)."""

from trustroute.router.feedback.policy import EVALUATOR_KEY, FeedbackPolicy, KeyPolicy

__all__ = ["EVALUATOR_KEY", "FeedbackPolicy", "KeyPolicy"]

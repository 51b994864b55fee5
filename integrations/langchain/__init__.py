"""LangChain integration: ``RoutedRunnable`` routes each input to the best agent and
records every outcome; ``TraceCollector`` turns a run into a scored ReasoningTrace;
``HandoffRunnable`` answers from retrieval or hands the task to a person."""

from trustroute.integrations.langchain.callbacks import TraceCollector
from trustroute.integrations.langchain.errors import AgentsMismatch, AllAgentsFailed, TaskTypeError
from trustroute.integrations.langchain.handoff import HandoffResult, HandoffRunnable
from trustroute.integrations.langchain.recording import (
    TraceQualityWarning,
    UsageCollector,
    run_cost,
)
from trustroute.integrations.langchain.runnable import RoutedRunnable
from trustroute.integrations.langchain.task import (
    FixedTaskType,
    fixed_task_type,
    resolve_task_type,
)

__all__ = [
    "AgentsMismatch",
    "AllAgentsFailed",
    "FixedTaskType",
    "HandoffResult",
    "HandoffRunnable",
    "RoutedRunnable",
    "TaskTypeError",
    "TraceCollector",
    "TraceQualityWarning",
    "UsageCollector",
    "fixed_task_type",
    "resolve_task_type",
    "run_cost",
]

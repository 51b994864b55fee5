"""LangChain integration: ``RoutedRunnable`` routes each input to the best agent and
records every outcome; ``TraceCollector`` turns a run into a scored ReasoningTrace;
``HandoffRunnable`` answers from retrieval or hands the task to a person."""

from integrations.langchain.callbacks import TraceCollector
from integrations.langchain.errors import AgentsMismatch, AllAgentsFailed, TaskTypeError
from integrations.langchain.handoff import HandoffResult, HandoffRunnable
from integrations.langchain.recording import UsageCollector, run_cost
from integrations.langchain.runnable import RoutedRunnable
from integrations.langchain.task import resolve_task_type

__all__ = [
    "AgentsMismatch",
    "AllAgentsFailed",
    "HandoffResult",
    "HandoffRunnable",
    "RoutedRunnable",
    "TaskTypeError",
    "TraceCollector",
    "UsageCollector",
    "resolve_task_type",
    "run_cost",
]

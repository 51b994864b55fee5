"""Constructor arguments of the LangChain runnables, checked with one-line errors that
name the argument (and, for an agent, the agent)."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import Runnable
from langchain_core.runnables.base import coerce_to_runnable
from pydantic import BaseModel, ValidationError

from trustroute.profiles.validation import describe_validation_error


def as_runnable(value: Any, what: str) -> Runnable[Any, Any]:
    """``value`` as a Runnable (functions and dicts coerced as LCEL does); a TypeError
    naming ``what`` (``agents['fast']``, ``answer_chain``) when it cannot be one."""
    try:
        return coerce_to_runnable(value)
    except TypeError:
        raise TypeError(f"{what} must be a Runnable, a callable or a dict of them, got "
                        f"{value!r:.80}") from None


def retrieval_source(value: Any) -> Any:
    """``value`` if HandoffRunnable can retrieve with it: a vector store (searched with
    relevance scores) or a retriever (any runnable returning documents)."""
    if callable(getattr(value, "similarity_search_with_relevance_scores", None)) or \
            callable(getattr(value, "invoke", None)):
        return value
    raise TypeError("retriever_or_vectorstore must be a vector store or a retriever, got "
                    f"{value!r:.80}")


def one_line(exc: ValidationError, model: type[BaseModel]) -> ValueError:
    """``exc`` (a model's constructor arguments that do not validate) on one line, each
    problem named by its argument: ``bad RoutedRunnable arguments: max_attempts: ...``."""
    text = describe_validation_error(exc, model)  # worded for a config file's keys
    for key, argument in (("unknown key", "unknown argument"),
                          ("required key", "required argument")):
        text = text.replace(key, argument)
    return ValueError(f"bad {model.__name__} arguments: {text}")

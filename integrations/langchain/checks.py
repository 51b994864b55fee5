"""Constructor arguments of the LangChain runnables, checked with one-line errors that
name the argument (and, for an agent, the agent)."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import Runnable
from langchain_core.runnables.base import coerce_to_runnable
from pydantic import BaseModel, ValidationError

from trustroute.profiles.validation import describe_validation_error
from trustroute.router.handoff.transfer.hook import hook_name


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


def distinct_hooks(hooks: list[Any], taken: list[Any]) -> list[Any]:
    """``hooks``, refused when one bears a name of the ``taken`` ones (the router's): a
    pending hand-off is found again by its hook's name, so another dispatcher's retry
    would send it to the wrong receiver."""
    clash = sorted({hook_name(h) for h in hooks} & {hook_name(h) for h in taken})
    if clash:
        names = ", ".join(map(repr, clash))
        raise ValueError(f"hooks: {names} is also the name of a hook of the router's; "
                         "pending hand-offs are found again by hook name, so give these "
                         "hooks another name= (WebhookHook(url, name='billing'))")
    return hooks

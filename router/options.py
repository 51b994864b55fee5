"""Options given to ``AgentRouter`` as a model, as a mapping, or not at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from trustroute.profiles.validation import validated

M = TypeVar("M", bound=BaseModel)


def options_of(model: type[M], value: M | Mapping[str, Any] | None, name: str) -> M:
    """``value`` as a ``model``: itself, a mapping validated into one (the keys of the
    matching config section), or the defaults for None. A bad mapping raises ValueError
    on one line naming every wrong key; anything else, TypeError."""
    if value is None:
        return model()
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a {model.__name__} or a mapping, "
                        f"got {type(value).__name__}")
    return validated(model, dict(value), name, f"bad {name} options: ")

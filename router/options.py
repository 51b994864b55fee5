"""Options given to ``AgentRouter`` as a model, as a mapping, or not at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

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
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:  # worded as the config file's section would be
        from trustroute.router.config.loader import describe_problem  # (config builds routers)
        problems = "; ".join(f"{name}.{describe_problem(err, model)}" for err in exc.errors())
        raise ValueError(f"bad {name} options: {problems}") from None

"""Explanations built on first read: a score's ``reason`` and ``components`` on demand.

Every decision carries a one-line reason and the numbers behind each candidate's score,
but formatting them for ten candidates costs more than choosing among them, and most
decisions are never read by a person (the decision log reads them later, off the
decision path). So a score may be created *deferred*: its ``reason`` slot holds a
``Deferred`` explainer and its ``components`` slot the explainer's key; the first read
of either field asks the explainer for both and stores them in place. The values read
are exactly those an eager build would have stored; equality, ``repr``,
``dataclasses.asdict``/``replace`` and pickling all read through the fields, so they
see the explained values too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

C = TypeVar("C", bound=type)


class Deferred:
    """Builds ``(reason, components)`` for one key when they are first read."""

    __slots__ = ()

    def explain(self, key: Any) -> tuple[str, Mapping[str, float]]:
        """The reason and components that ``key`` stands for."""
        raise NotImplementedError


def explained_on_read(cls: C) -> C:
    """Class decorator for a slotted dataclass with ``reason`` and ``components`` fields:
    a ``Deferred`` stored in ``reason`` is resolved (with ``components`` as its key) on
    first read of either field. Concurrent first reads compute the same values."""
    reason_slot = cls.__dict__["reason"]  # the member descriptors dataclass(slots) made
    components_slot = cls.__dict__["components"]

    def resolve(self: Any) -> None:
        pending = reason_slot.__get__(self, cls)
        if isinstance(pending, Deferred):
            reason, components = pending.explain(components_slot.__get__(self, cls))
            components_slot.__set__(self, components)  # components first: reason is the flag
            reason_slot.__set__(self, reason)

    def get_reason(self: Any) -> str:
        value = reason_slot.__get__(self, cls)
        if isinstance(value, Deferred):
            resolve(self)
            value = reason_slot.__get__(self, cls)
        return value

    def get_components(self: Any) -> Mapping[str, float]:
        if isinstance(reason_slot.__get__(self, cls), Deferred):
            resolve(self)
        return components_slot.__get__(self, cls)

    cls.reason = property(  # type: ignore[attr-defined]
        get_reason, reason_slot.__set__, doc="One-line human-readable explanation.")
    cls.components = property(  # type: ignore[attr-defined]
        get_components, components_slot.__set__, doc="The numbers that explain the score.")
    return cls

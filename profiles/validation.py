"""Settings that do not validate, described on one line.

Every problem is named at its key path, as a config file's section would word it
(``store.request_timeout_s: expected a value greater than 0, got -1``), so the person
reading it knows where to look. The values of secret keys are never echoed.
"""

from __future__ import annotations

import difflib
import math
import typing
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ValidationError,
    ValidationInfo,
    field_validator,
)

M = TypeVar("M", bound=BaseModel)

#: Key names (any part of a key path, any case) whose values are secrets.
SECRET_MARKERS = ("password", "passwd", "secret", "token", "credential", "api_key", "apikey",
                  "authorization", "private_key")


def is_secret_key(parts: Iterable[Any]) -> bool:
    """True when a key path names a secret (``store.password``, ``headers.Authorization``)."""
    return any(m in str(p).lower() for p in parts for m in SECRET_MARKERS)


#: How much less alike than the closest name another may be and still be suggested
#: (``evaluater``: ``evaluate`` 0.94, ``evaluator`` 0.89, both offered).
_RUNNER_UP = 0.1


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'coder'?)`` for the closest of ``known`` (and the next closest
    as well when it is almost as close: ``'evaluate' or 'evaluator'``), or nothing."""
    choices = list(known)
    close = difflib.get_close_matches(name, choices, n=2)
    if not close:
        return ""
    alike = [difflib.SequenceMatcher(None, name, c).ratio() for c in close]
    shown = close[:1] + [c for c, r in zip(close[1:], alike[1:], strict=True)
                         if r >= alike[0] - _RUNNER_UP]
    return f" (did you mean {' or '.join(map(repr, shown))}?)"


def key_path(parts: tuple[Any, ...] | list[Any]) -> str:
    """``('agents', 0, 'id')`` -> ``agents.0.id`` (``<root>`` for the whole file)."""
    return ".".join(str(p) for p in parts) or "<root>"


def _model_at(model: type[BaseModel] | None, parts: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys live at ``parts`` (list indices are stepped over)."""
    for part in parts:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        model = next(iter(_models_in(field.annotation)), None) if field else None
    return model


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through lists, unions, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def digit_count(value: int) -> int:
    """How many decimal digits ``value`` has, found without writing it out (Python
    refuses to write an int of more than ``sys.get_int_max_str_digits()`` digits)."""
    magnitude = abs(value)
    digits = int(math.log10(magnitude)) + 1 if magnitude else 1
    if magnitude and 10 ** (digits - 1) > magnitude:  # log10 rounded up (999...9)
        digits -= 1
    elif 10 ** digits <= magnitude:
        digits += 1
    return digits


def quoted(value: Any) -> str:
    """``repr(value)`` for an error message, cut after 40 characters with the length said
    (a 5,000-character cell was echoed whole); an int too long to write is described."""
    if isinstance(value, int) and not isinstance(value, bool) and digit_count(value) > 60:
        return f"a number of {digit_count(value):,} digits"
    text = repr(value)
    if len(text) <= 60:
        return text
    return f"{text[:40]}... ({len(value) if isinstance(value, str) else len(text):,} characters)"


def _shown(value: Any) -> str:
    if isinstance(value, dict | list | tuple):
        return f"a {type(value).__name__}"
    if isinstance(value, int) and digit_count(value) > 60:  # no need to write it out
        return f"a number of {digit_count(value):,} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_problem(err: Any, model: type[BaseModel] | None = None) -> str:
    """One pydantic error as ``key.path: expected ..., got ...``."""
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        parent = _model_at(model, loc[:-1])
        if parent is None:
            return f"{key_path(loc)}: unknown key {key!r}"
        allowed = sorted(parent.model_fields)
        hint = did_you_mean(key, allowed)
        return (f"{key_path(loc)}: unknown key {key!r}{hint}; allowed here: "
                f"{', '.join(allowed)}")
    if err["type"] == "missing":
        return f"{key_path(loc)}: required key is missing"
    msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if err["type"] == "timezone_aware":
        msg = "expected a time with its zone (Z or +HH:MM)"
    if msg.startswith("Input should be "):
        msg = msg[len("Input should be "):]
        if msg.startswith(("greater", "less")):
            msg = "a value " + msg
        msg = "expected " + msg
    if "input" in err and not is_secret_key(loc) and err["type"] != "value_error":
        # pydantic may say what it got already ("..., got a number with a fractional
        # part"): the value comes first, its kind after, never "got" twice
        head, got, kind = msg.partition(", got ")
        msg = f"{head}, got {_shown(err['input'])}{f' ({kind})' if got else ''}"
    return f"{key_path(loc)}: {msg}"


def describe_validation_error(exc: ValidationError, model: type[BaseModel] | None = None
                              ) -> str:
    """Every problem on one line: ``key.path: expected ...; other.key: ...``."""
    return "; ".join(describe_problem(err, model) for err in exc.errors())


def validated(model: type[M], value: Any, name: str = "", lead: str = "",
              error: type[ValueError] = ValueError) -> M:
    """``value`` validated into a ``model``, or ``error`` on one line: ``lead`` and every
    problem at its key path under ``name`` (as the config file's section would word it)."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(_under(name, describe_problem(err, model))
                             for err in exc.errors())
        raise error(lead + problems) from None


def _under(name: str, problem: str) -> str:
    """``problem`` (``key.path: ...``) as a problem under ``name``; one of the whole value
    (``<root>: ...``) is named by ``name`` alone, or by nothing when there is none."""
    whole = problem.startswith("<root>: ")
    if not name:
        return problem.removeprefix("<root>: ")
    return f"{name}: {problem.removeprefix('<root>: ')}" if whole else f"{name}.{problem}"


def refuse_bool(value: Any) -> Any:
    """A number field's value as given, unless it is true or false, or a list of numbers
    holding one (an error)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    if isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, bool):
                raise ValueError(f"expected numbers, got {str(item).lower()} among them")
    return value


#: One number field that refuses true/false (``Annotated[float, NOT_A_BOOL, ...]``): for
#: models where ``NumbersNotBools`` cannot be used (a discriminated union's members).
NOT_A_BOOL = BeforeValidator(refuse_bool)


class NumbersNotBools(BaseModel):
    """A settings model whose numbers refuse true/false: pydantic reads ``true`` as 1, so
    ``max_concurrent: true`` in a config file would quietly mean one at a time."""

    @field_validator("*", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _wants_number(field.annotation):
            return refuse_bool(value)
        return value


def _wants_number(annotation: Any) -> bool:
    """Whether a field takes numbers and not booleans (through Annotated and unions)."""
    if annotation is bool:
        return False
    if annotation in (int, float):
        return True
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        return _wants_number(args[0])
    return bool(args) and bool not in args and any(_wants_number(a) for a in args)

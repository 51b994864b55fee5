"""What may be bound as a query parameter: text that SurrealDB can send back.

SurrealDB 2.3 stores a string holding a NUL character, then fails to serialise every
answer that would carry it ("to be serialized string contained a null byte"): one such
comment made every later read of the trust log fail, and no router could open the
store. The fields people fill in are checked where they are given, naming the field;
this check is the store's own, on every query, so that no path can write such a row.
Text that must be kept whatever it holds (a hand-off's reason, a hook's error) is made
``storable`` instead: each such character becomes U+FFFD, as a decoder shows bad bytes.
"""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class UnstorableText(ValueError):
    """A string that the store could keep but never send back."""


def check_params(params: dict[str, Any]) -> None:
    """Raise ``UnstorableText`` naming the parameter path of a string with a NUL
    character or a lone surrogate (which has no UTF-8 form) anywhere in ``params``."""
    for name, value in params.items():
        _check(value, name)


def _check(value: Any, where: str) -> None:
    if isinstance(value, str):
        if found := _UNSTORABLE.search(value):
            if found.group() == "\x00":
                raise UnstorableText(f"{where} must not contain a NUL character")
            raise UnstorableText(f"{where} holds {found.group()!r}, a lone surrogate that "
                                 "has no UTF-8 form")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check(key, f"{where} key")
            _check(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]")


def storable(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)

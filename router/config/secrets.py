"""Keeping credentials out of what trustroute prints.

Two layers, so that one mistake does not leak a password:

- the user:password part of anything shaped like a URL is replaced by ``***``, even in
  a URL that does not parse (``ws:/root:pw@host``, one slash), since that is the URL an
  error message quotes (``redact_credentials``);
- the values a config file gives to secret keys (``password``, ``token``, ...), and
  every ``${VAR}`` substituted in front of an ``@`` (the user:password position of a
  URL), are remembered and replaced wherever they appear (``mask_credentials``).

Values shorter than ``MIN_SECRET_LENGTH`` are not searched for: replacing every ``ab`` in
a message would hide the message, not the secret; the first layer still hides them in
URLs and validation never echoes a secret key's value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trustroute.profiles.store.location import redact_credentials
from trustroute.profiles.validation import is_secret_key

MIN_SECRET_LENGTH = 4
MASK = "***"


def secret_values(value: Any, where: tuple[Any, ...] = ()) -> set[str]:
    """Every string a parsed config gives to a secret key (its nesting is already bounded)."""
    if isinstance(value, dict):
        return {s for k, v in value.items() for s in secret_values(v, (*where, k))}
    if isinstance(value, list):
        return {s for i, v in enumerate(value) for s in secret_values(v, (*where, i))}
    return {value} if isinstance(value, str) and value and is_secret_key(where) else set()


def mask_credentials(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with URL credentials and every known secret value replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_SECRET_LENGTH:
            text = text.replace(secret, MASK)
    return redact_credentials(text)

"""Stored text made safe to print: what a terminal would act on is shown, not obeyed."""

from __future__ import annotations

from rich.markup import escape

from trustroute.profiles.records import is_control


def shown(text: str) -> str:
    """``text`` with rich markup escaped and control or bidi characters written as
    ``\\x1b``/``\\u202e`` escapes: a name stored before such characters were refused
    (or read from a file) cannot clear the screen, colour it or reverse what follows."""
    if text.isprintable():
        return escape(text)
    return escape("".join(char.encode("unicode_escape").decode("ascii")
                          if is_control(char) else char for char in text))

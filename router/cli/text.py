"""Stored text made safe to print: what a terminal would act on is shown, not obeyed."""

from __future__ import annotations

from rich.markup import escape

from trustroute.profiles.records import is_control

# After a name's trailing backslashes: an empty span, so they read as written whatever
# follows them (text, a tag, nothing).
_AFTER_BACKSLASH = "[reset][/reset]"


def shown(text: str) -> str:
    """``text`` with rich markup escaped and control or bidi characters written as
    ``\\x1b``/``\\u202e`` escapes: a name stored before such characters were refused
    (or read from a file) cannot clear the screen, colour it or reverse what follows.
    (The consoles print no emoji codes, so ``:smile:`` needs no escape.)"""
    if not text.isprintable():
        text = "".join(char.encode("unicode_escape").decode("ascii")
                       if is_control(char) else char for char in text)
    body = text.rstrip("\\")
    if body == text:
        return escape(text)
    # k trailing backslashes: 2k of them before a tag read as k (rich's escape doubles one
    # alone, which then shows doubled where no tag follows, and leaves two as two)
    return escape(body) + "\\" * (2 * (len(text) - len(body))) + _AFTER_BACKSLASH

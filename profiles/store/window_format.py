"""The stored text form of a profile's recency window.

Entries are separated by ``;``; each is ``"<POSIX seconds> <quality> <success 0/1> <seq>"``,
oldest first. The client writes the first three fields (``repr`` of a float is its
shortest exact form, so a reloaded window equals the one built in memory bit for bit);
the store appends the seq, which only it knows, inside the write transaction.
"""

from __future__ import annotations

from profiles.profile import WindowEntry
from profiles.records import ExecutionRecord

SEPARATOR = ";"
TYPICAL_ENTRY_CHARS = 48  # "1767225600.123456 0.8123456789012345 1 1234": about 44


def window_params(window_size: int) -> dict[str, int]:
    """Bound parameters of a window append: its size, and the text length past which
    the store trims it back to the window.

    Trimming (split, slice, join) costs more than appending, but every write rewrites
    the whole text, so the slack is kept small: about a quarter of the window.
    """
    return {"w": window_size, "trim_at": (window_size + window_size // 4 + 1)
            * TYPICAL_ENTRY_CHARS}


def window_entry(record: ExecutionRecord) -> str:
    """A record's window entry without its seq."""
    return f"{record.timestamp.timestamp()!r} {record.effective_quality!r} {int(record.success)}"


def parse_window(text: str | None) -> list[WindowEntry]:
    """Window entries from their stored form (oldest first; may hold more than the
    window, the caller keeps the newest)."""
    entries = []
    for item in (text or "").split(SEPARATOR):
        if item:
            at, quality, success, seq = item.split(" ")
            entries.append(WindowEntry(float(at), float(quality), success == "1", int(seq)))
    return entries

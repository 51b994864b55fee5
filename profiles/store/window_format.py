"""The stored text form of a profile's recency window.

Entries are separated by ``;``; each is ``"<POSIX seconds> <quality> <success 0/1> <seq>"``,
oldest first. The client writes the first three fields (``repr`` of a float is its
shortest exact form, so a reloaded window equals the one built in memory bit for bit);
the store's repository appends the seq it assigned. A pair's window is stored in two
parts, both in this format (see executions.py): the profile row's short tail and the
older, trimmed part in ``profile_window``.
"""

from __future__ import annotations

from trustroute.profiles.profile import WindowEntry
from trustroute.profiles.records import ExecutionRecord

SEPARATOR = ";"


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

"""Writers' counters: how a router proves it has folded every row of a log table.

Each appending repository is a *writer* with an id of its own (a uuid made when the store
opens it). Per log table it appends to, a writer owns one counter row,
``log_writer:[writer, table]``, holding ``n``: how many rows it has appended there. Each
append is one transaction that adds the number of its rows to the writer's own counter
and stamps each row with ``writer`` and ``wseq`` (``n - k + 1`` .. ``n``). Only that
writer ever writes its counter (one connection, one write at a time), so no increment
is lost to a concurrent ``+=``. Because counter and rows commit together, a router that
reads ``n`` for a writer knows every row of that writer with ``wseq <= n`` is visible
(one that is not was deleted by a retirement): it fetches the ``wseq`` range it lacks
on the ``(writer, wseq)`` index, whatever the rows' stamps and however late they
committed. docs/storage.md ("Following the log") has the argument.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from trustroute.profiles.store.connection import Connection

SCHEMA = """
DEFINE TABLE IF NOT EXISTS log_writer SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS n ON log_writer TYPE int ASSERT $value >= 0;
"""


def bump(table: str, count: str) -> str:
    """The statement (inside an append's transaction) that adds ``count`` (SurrealQL)
    to this writer's counter of ``table`` and keeps the new value in ``$n``."""
    return (f"LET $n = (UPSERT ONLY type::thing('log_writer', [$writer, '{table}']) "
            f"SET n = (n ?? 0) + {count} RETURN VALUE n);")


COUNTERS = "SELECT record::id(id) AS key, n FROM log_writer;"


def counters(conn: Connection) -> dict[str, dict[str, int]]:
    """Every writer's counter, per log table: ``{table: {writer: n}}`` (one small read,
    O(writers))."""
    return by_table(conn.run(COUNTERS)[0])


def by_table(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``COUNTERS``' rows as ``{table: {writer: n}}``."""
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for row in rows:
        writer, table = row["key"]
        found[table][writer] = int(row["n"])
    return dict(found)


def written(conn: Connection, table: str, columns: str, writer: str, after: int, upto: int,
            batch: int = 5000) -> Iterator[list[dict[str, Any]]]:
    """The rows ``writer`` appended to ``table`` with ``after < wseq <= upto``, one
    ``wseq`` range of ``batch`` at a time (a key range on the index: no sort, no offset)."""
    for start in range(after, upto, batch):
        yield list(conn.run(f"SELECT {columns} FROM {table} WHERE writer = $w "
                            "AND wseq > $a AND wseq <= $b;",
                            {"w": writer, "a": start, "b": min(upto, start + batch)})[0])

"""Cached projections of the log: what a router folded, and up to where it is valid.

Reading the whole log when a router opens costs about 0.1 ms per execution (decoding
rows is Python work), so a router writes what it folded as a *projection*: a generation
of chunk rows (JSON text, ``projection_chunk``) and a head row (``projection:head``) that
names the generation and the log position it is valid at. The head is written last, in
the same transaction as the chunks, so a crash leaves the previous generation in place.

A projection is a cache, never a fact. Opening a router verifies it against the log
(``verify``): the number of execution and feedback rows stamped up to its settled
position must equal the number it folded. Rows deleted, or stamped before the position
but visible only after it was written, make the counts differ, and the router then folds
the whole log instead. Several routers may write generations at once: each is complete
in itself, and the head names one of them.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from trustroute.profiles.store.connection import Connection

FORMAT = 2  # the chunk layout (router.checkpoint); another format is never read

SCHEMA = """
DEFINE TABLE IF NOT EXISTS projection SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS generation ON projection TYPE string;
DEFINE FIELD IF NOT EXISTS chunks ON projection TYPE int;
DEFINE FIELD IF NOT EXISTS format ON projection TYPE int;
DEFINE FIELD IF NOT EXISTS meta ON projection TYPE string;
DEFINE FIELD IF NOT EXISTS settled ON projection TYPE datetime;
DEFINE FIELD IF NOT EXISTS executions ON projection TYPE int;
DEFINE FIELD IF NOT EXISTS people ON projection TYPE int;
DEFINE FIELD IF NOT EXISTS written_at ON projection TYPE datetime;

DEFINE TABLE IF NOT EXISTS projection_chunk SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS generation ON projection_chunk TYPE string;
DEFINE FIELD IF NOT EXISTS n ON projection_chunk TYPE int;
DEFINE FIELD IF NOT EXISTS data ON projection_chunk TYPE string;
DEFINE INDEX IF NOT EXISTS projection_chunk_generation ON projection_chunk FIELDS generation;
"""

_WRITE = """
BEGIN TRANSACTION;
FOR $c IN $chunks {
    CREATE projection_chunk CONTENT { generation: $g, n: $c.n, data: $c.data };
};
LET $old = (SELECT VALUE generation FROM ONLY projection:head);
UPSERT projection:head CONTENT {
    generation: $g, chunks: array::len($chunks), format: $format, meta: $meta,
    settled: $settled, executions: $executions, people: $people, written_at: time::now()
};
DELETE projection_chunk WHERE generation != $g AND generation != $old;
COMMIT TRANSACTION;
"""

_COUNTS = """
RETURN [
    (SELECT count() AS n FROM execution
     WHERE stored_at = NONE OR stored_at <= $settled GROUP ALL)[0].n ?? 0,
    (SELECT count() AS n FROM trust_feedback
     WHERE stored_at = NONE OR stored_at <= $settled GROUP ALL)[0].n ?? 0
];
"""


class ProjectionRepository:
    """Writes and reads cached projections."""

    SCHEMA = SCHEMA

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def write(self, chunks: list[str], meta: str, settled: datetime, executions: int,
              people: int) -> None:
        """Write a generation valid at ``settled`` (``executions`` and ``people`` rows
        stamped up to it were folded) and point the head at it."""
        self._conn.run(_WRITE, {
            "g": uuid.uuid4().hex, "chunks": [{"n": i, "data": c} for i, c in enumerate(chunks)],
            "format": FORMAT, "meta": meta, "settled": settled, "executions": executions,
            "people": people})

    def read(self) -> tuple[dict[str, Any], list[str]] | None:
        """The head and its generation's chunks, in order; None when there is none, or
        its format is another, or a chunk is missing."""
        head = self._conn.run("SELECT * OMIT id FROM ONLY projection:head;")[0]
        if not head or head.get("format") != FORMAT:
            return None
        chunks = self._conn.run("SELECT n, data FROM projection_chunk WHERE generation = $g "
                                "ORDER BY n;", {"g": head["generation"]})[0]
        if [c["n"] for c in chunks] != list(range(head["chunks"])):
            return None
        return dict(head), [c["data"] for c in chunks]

    def counts(self, settled: datetime) -> tuple[int, int]:
        """How many execution and feedback rows are stamped up to ``settled`` (rows of
        stores older than the stamp count too)."""
        executions, people = self._conn.run(_COUNTS, {"settled": settled})[-1]
        return int(executions), int(people)

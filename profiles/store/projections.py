"""Cached projections of the log: what a router folded, and up to where it is valid.

Reading the whole log when a router opens costs about 0.1 ms per execution (decoding
rows is Python work), so a router writes what it folded as a *projection*: a generation
of chunk rows (JSON text, ``projection_chunk``) and a head row (``projection:head``) that
names the generation, the digest of its text and, inside it, how far it folded each log
table per writer (its frontiers). The head is written in the same transaction as the
chunks, so a crash leaves the previous generation in place.

A projection is a cache, never a fact. Opening a router checks it before using it: its
text must be whole (every chunk, the head's SHA-256 digest of meta and chunks), and what
it claims must be what the log holds (``totals``): the execution and feedback rows
within its frontiers, which are the rows the log holds less those its writers' counters
number beyond them. The log is append-only, so a row deleted or lost behind the cache's
back makes the two differ. A cache that fails either is not used: the router folds the
whole log. Several routers may write
generations at once: each is complete in itself, and the head names one of them.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from trustroute.profiles.store import writers
from trustroute.profiles.store.connection import Connection

#: The chunk layout (router.checkpoint); another format is never read. 3: frontiers
#: per writer instead of a settled stamp, and a digest. 4: runs without quality evidence
#: per pair, and the feedback state (verdicts, runs awaiting them) when there is one.
FORMAT = 4

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
DEFINE FIELD IF NOT EXISTS digest ON projection TYPE option<string>;

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
    settled: $settled, executions: $executions, people: $people, digest: $digest,
    written_at: time::now()
};
DELETE projection_chunk WHERE generation != $g AND generation != $old;
COMMIT TRANSACTION;
"""

# What a cache is checked against, read in one transaction (one snapshot of the log):
# the writers' counters and each checked table's row count (a count of a whole table is
# answered without reading its rows: about 1 us a row, against 8 for a filtered count).
_TOTALS = f"""
BEGIN TRANSACTION;
{writers.COUNTERS}
SELECT count() AS n FROM execution GROUP ALL;
SELECT count() AS n FROM trust_feedback GROUP ALL;
COMMIT TRANSACTION;
"""


def digest(meta: str, chunks: Sequence[str]) -> str:
    """SHA-256 of a generation's text, chunk boundaries included."""
    sha = hashlib.sha256(meta.encode())
    for chunk in chunks:
        sha.update(b"\0" + chunk.encode())
    return sha.hexdigest()


class ProjectionRepository:
    """Writes and reads cached projections."""

    SCHEMA = SCHEMA

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def write(self, chunks: list[str], meta: str, settled: datetime, executions: int,
              people: int) -> None:
        """Write a generation (window keys kept from ``settled``; ``executions`` and
        ``people`` rows folded) and point the head at it."""
        self._conn.run(_WRITE, {
            "g": uuid.uuid4().hex, "chunks": [{"n": i, "data": c} for i, c in enumerate(chunks)],
            "format": FORMAT, "meta": meta, "settled": settled, "executions": executions,
            "people": people, "digest": digest(meta, chunks)})

    def read(self) -> tuple[dict[str, Any], str, list[str]] | None:
        """The head, the meta text and its generation's chunks, in order; None when there
        is none or its format is another. Raises ValueError when a chunk is missing or
        the text is not what the head's digest says (a torn or edited cache)."""
        head = self._conn.run("SELECT * OMIT id FROM ONLY projection:head;")[0]
        if not head or head.get("format") != FORMAT:
            return None
        chunks = self._conn.run("SELECT n, data FROM projection_chunk WHERE generation = $g "
                                "ORDER BY n;", {"g": head["generation"]})[0]
        if [c["n"] for c in chunks] != list(range(head["chunks"])):
            raise ValueError(f"chunks {[c['n'] for c in chunks]} of {head['chunks']}")
        texts = [str(c["data"]) for c in chunks]
        if digest(str(head["meta"]), texts) != head.get("digest"):
            raise ValueError("its text does not match the digest in its head")
        return dict(head), str(head["meta"]), texts

    def totals(self) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """The writers' counters (``{table: {writer: n}}``) and the rows of ``execution``
        and ``trust_feedback``, from one snapshot."""
        numbered, executions, people = self._conn.run(_TOTALS)
        return writers.by_table(numbered), {
            "execution": int(executions[0]["n"]) if executions else 0,
            "trust_feedback": int(people[0]["n"]) if people else 0}

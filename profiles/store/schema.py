"""Schema bookkeeping: idempotent definitions and a recorded schema version.

Each repository owns the DEFINE statements of its tables (next to the queries that use
them); ``ensure_schema`` runs them all with ``IF NOT EXISTS`` and records the version in
``meta:schema`` so a future release can migrate. A store written by a newer schema is
refused rather than silently misread.
"""

from __future__ import annotations

from collections.abc import Iterable

from trustroute.profiles.store.connection import Connection
from trustroute.profiles.store.errors import SchemaVersionError

#: 2: the execution log is the truth (no profile aggregates written); 3: log rows carry
#: their writer and its number (``profiles.store.writers``), followed by counter. Rows
#: of older versions have neither: a router folds them when it reads the whole log.
SCHEMA_VERSION = 3

META_SCHEMA = """
DEFINE TABLE IF NOT EXISTS meta SCHEMAFULL;
DEFINE FIELD IF NOT EXISTS version ON meta TYPE int ASSERT $value >= 1;
DEFINE FIELD IF NOT EXISTS updated_at ON meta TYPE datetime;
"""


# Version 1 stores typed these fields as required; the log design leaves them optional.
# Run once, when a version 1 store is opened (routine opens never redefine a field: a
# field redefined by one process while another defines an index on it is briefly gone).
UPGRADE_FROM_1 = """
DEFINE TABLE IF NOT EXISTS execution SCHEMAFULL;
DEFINE FIELD OVERWRITE seq ON execution TYPE option<int>;
DEFINE TABLE IF NOT EXISTS trust_feedback SCHEMAFULL;
DEFINE FIELD OVERWRITE approved ON trust_feedback TYPE option<bool>;
DEFINE TABLE IF NOT EXISTS execution_archive SCHEMAFULL;
DEFINE FIELD OVERWRITE seq ON execution_archive TYPE option<int>;
"""


def ensure_schema(conn: Connection, parts: Iterable[str]) -> int:
    """Create missing tables, check and record the schema version; returns it."""
    rows = conn.run("DEFINE TABLE IF NOT EXISTS meta SCHEMAFULL; SELECT version FROM meta:schema;")
    found = rows[-1][0]["version"] if rows[-1] else None
    if found is not None and found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"this store uses schema version {found}, newer than this trustroute "
            f"understands ({SCHEMA_VERSION}); upgrade trustroute"
        )
    if found == 1:
        conn.run(UPGRADE_FROM_1)
    conn.run(META_SCHEMA + "\n".join(parts))
    conn.run("UPSERT meta:schema SET version = $v, updated_at = time::now();",
             {"v": SCHEMA_VERSION})
    return SCHEMA_VERSION

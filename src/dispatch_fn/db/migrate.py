"""Applies the plain-SQL migrations in ``migrations/`` that a database lacks.

Each migration runs in its own transaction together with its ledger row, so a
failure leaves every earlier migration applied and recorded and the failed one
not at all. A file whose first line is ``-- duly:no-transaction`` runs outside
any transaction: each of its statements runs and commits alone, as ``CREATE
INDEX CONCURRENTLY`` and batched backfills of large tables need, and its
ledger row is written last, so a migration killed half way is re-run from its
start (such files are written to be re-runnable). The ledger records each
file's SHA-256, and a database whose applied file has since been edited is
refused before anything runs: the schema it has is not the one the file now
describes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from importlib import resources
from typing import Final

import psycopg
from psycopg import sql

from dispatch_fn.db.sql import named_row, named_rows, statement
from dispatch_fn.errors import MigrationChecksumError, MigrationError

LEDGER: Final = "duly_schema_migration"
NO_TRANSACTION: Final = "-- duly:no-transaction"
# Two operators (or a deploy and an operator) migrating at once take turns
# instead of both applying the same file.
_MIGRATION_LOCK: Final = 0x0D01_7D15
_LOCK_POLL_S: Final = 0.2
_LOCK_WAIT_S: Final = 600.0
# The migration whose ledger column the migration step fills for runs recorded before it.
_ENGINE_DAYS: Final = "0020_engine_local_days"


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: its version (the file name without ``.sql``) and its text."""

    version: str
    script: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the file's UTF-8 text, as recorded in the ledger."""
        return hashlib.sha256(self.script.encode("utf-8")).hexdigest()

    @property
    def transactional(self) -> bool:
        """False when the file's first line asks to run outside a transaction."""
        first_line = self.script.lstrip().partition("\n")[0].strip()
        return first_line != NO_TRANSACTION


def bundled_migrations() -> list[Migration]:
    """Every migration shipped in the package, oldest first."""
    folder = resources.files("dispatch_fn.db").joinpath("migrations")
    files = sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".sql")),
        key=lambda entry: entry.name,
    )
    return [Migration(entry.name.removesuffix(".sql"), entry.read_text("utf-8")) for entry in files]


def available_migrations() -> list[tuple[str, str]]:
    """Return ``(version, sql)`` for every bundled migration, oldest first."""
    return [(each.version, each.script) for each in bundled_migrations()]


@dataclass(frozen=True, slots=True)
class SchemaState:
    """The schema a database holds, against the migrations this code bundles."""

    # The newest version the database's ledger records ("" for none at all).
    newest: str
    # The newest version this code bundles.
    code_newest: str
    # Versions the ledger records that this code does not bundle, oldest first:
    # a newer release applied them, and this code (a rollback's) runs on them.
    unknown: tuple[str, ...]


def schema_state(
    conn: psycopg.Connection[object], migrations: list[Migration] | None = None
) -> SchemaState:
    """What ``conn``'s database holds, and what of it this code does not know."""
    bundled = {each.version for each in migrations or bundled_migrations()}
    recorded = sorted(_ledger(conn)) if _ledger_exists(conn) else []
    return SchemaState(
        newest=recorded[-1] if recorded else "",
        code_newest=max(bundled),
        unknown=tuple(version for version in recorded if version not in bundled),
    )


def pending_migrations(
    conn: psycopg.Connection[object], migrations: list[Migration] | None = None
) -> list[str]:
    """Versions ``apply_migrations`` would apply now (checksums are not checked)."""
    done = _ledger(conn) if _ledger_exists(conn) else {}
    return [each.version for each in migrations or bundled_migrations() if each.version not in done]


def apply_migrations(
    conn: psycopg.Connection[object],
    migrations: list[Migration] | None = None,
    *,
    until: str | None = None,
) -> list[str]:
    """Apply pending migrations, oldest first (up to version ``until``); return those applied.

    ``migrations`` defaults to the bundled ones. Raises ``MigrationChecksumError``
    (applying nothing) when an applied file was edited, ``MigrationError`` when a
    migration fails (those before it stay applied).
    """
    chosen = bundled_migrations() if migrations is None else migrations
    conn.commit()  # start from a clean state: the lock below outlives transactions
    was_autocommit = conn.autocommit
    # Autocommit so that each migration (and a no-transaction one) is its own unit.
    conn.autocommit = True
    try:
        _lock(conn)
        try:
            return _apply(conn, chosen, until)
        finally:
            conn.execute(statement("migration_unlock"), {"lock": _MIGRATION_LOCK})
    finally:
        conn.autocommit = was_autocommit


def _lock(conn: psycopg.Connection[object]) -> None:
    # Polled, never waited for inside one statement: a migrator blocked in
    # pg_advisory_lock holds a snapshot, and CREATE INDEX CONCURRENTLY in the
    # session holding the lock waits for every snapshot to end; a deadlock.
    waited = 0.0
    while True:
        row = named_row(conn.execute(statement("migration_lock"), {"lock": _MIGRATION_LOCK}))
        if row is not None and row["locked"]:
            return
        if waited >= _LOCK_WAIT_S:
            raise MigrationError(
                f"another migration has held the migration lock for {waited:.0f} s; "
                "expected it to finish (see pg_locks for advisory lock "
                f"{_MIGRATION_LOCK})"
            )
        time.sleep(_LOCK_POLL_S)
        waited += _LOCK_POLL_S


def _apply(
    conn: psycopg.Connection[object], migrations: list[Migration], until: str | None
) -> list[str]:
    conn.execute(_ledger_statement("migration_ledger"))
    done = _ledger(conn)
    for each in migrations:
        recorded = done.get(each.version, "")
        if recorded and recorded != each.checksum:
            raise MigrationChecksumError(
                f"migration {each.version!r} was applied with checksum {recorded[:12]}… but the "
                f"file now has {each.checksum[:12]}…; an applied migration must not be edited: "
                "restore the file and add a new migration for the change"
            )
    for each in migrations:
        if each.version in done and not done[each.version]:
            # Applied before checksums existed: the file as it is now becomes the record.
            conn.execute(
                _ledger_statement("migration_ledger_adopt"),
                {"checksum": each.checksum, "version": each.version},
            )
    applied: list[str] = []
    for each in migrations:
        if each.version in done:
            continue
        if until is not None and each.version > until:
            break
        _run(conn, each)
        applied.append(each.version)
    if _ENGINE_DAYS in done or _ENGINE_DAYS in applied:
        # A data step no SQL can take: the engine's days (migration 0020).
        from dispatch_fn.db import ledger  # noqa: PLC0415 - the engine loads only here

        ledger.record_engine_days(conn)
    return applied


def _run(conn: psycopg.Connection[object], migration: Migration) -> None:
    record = _ledger_statement("migration_record")
    applied = {"version": migration.version, "checksum": migration.checksum}
    try:
        if migration.transactional:
            with conn.transaction():
                conn.execute(sql.SQL(migration.script))
                conn.execute(record, applied)
        else:
            for statement in split_statements(migration.script):
                conn.execute(sql.SQL(statement))
            conn.execute(record, applied)
    except psycopg.Error as failed:
        raise MigrationError(f"migration {migration.version!r} failed: {failed}") from failed


def _ledger_statement(name: str) -> sql.SQL | sql.Composed:
    # The ledger's own statements are files in statements/ (migration_*.sql),
    # the ledger's name their one slot.
    return statement(name, ledger=sql.Identifier(LEDGER))


def _ledger(conn: psycopg.Connection[object]) -> dict[str, str]:
    rows = named_rows(conn.execute(_ledger_statement("migration_ledger_read")))
    return {str(row["version"]): str(row["checksum"]) for row in rows}


def _ledger_exists(conn: psycopg.Connection[object]) -> bool:
    row = named_row(conn.execute(statement("migration_ledger_exists"), {"ledger": LEDGER}))
    return bool(row and row["found"])


def split_statements(script: str) -> list[str]:
    """The statements of ``script``: split at a ``;`` ending a line, outside ``$$`` bodies."""
    statements: list[str] = []
    current: list[str] = []
    in_body = False
    for line in script.splitlines():
        current.append(line)
        # A dollar-quoted body (DO $$ ... $$) may hold semicolons of its own.
        if line.count("$$") % 2:
            in_body = not in_body
        if not in_body and line.rstrip().endswith(";"):
            statement = "\n".join(current).strip()
            if _has_code(statement):
                statements.append(statement)
            current = []
    if _has_code("\n".join(current)):
        statements.append("\n".join(current).strip())
    return statements


def _has_code(text: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in text.splitlines())

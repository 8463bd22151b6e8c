"""Applies the plain-SQL migrations in ``migrations/`` that a database lacks.

A migration runs in one transaction with its ledger row, unless its first
line is ``-- duly:no-transaction``: then each of its statements runs and
commits alone, as ``CREATE INDEX CONCURRENTLY`` and batched backfills of
large tables need, and its ledger row is written last, so a migration killed
half way is re-run from its start (such files are written to be re-runnable).
"""

from __future__ import annotations

from importlib import resources

import psycopg
from psycopg import sql

_LEDGER = "duly_schema_migration"
# Two operators migrating at once take turns instead of both applying 0001.
_MIGRATION_LOCK = 0x0D01_7D15
NO_TRANSACTION = "-- duly:no-transaction"


def available_migrations() -> list[tuple[str, str]]:
    """Return ``(version, sql)`` for every bundled migration, oldest first."""
    folder = resources.files("dispatch_fn").joinpath("migrations")
    files = sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".sql")),
        key=lambda entry: entry.name,
    )
    return [(entry.name.removesuffix(".sql"), entry.read_text("utf-8")) for entry in files]


def apply_migrations(conn: psycopg.Connection[object], *, until: str | None = None) -> list[str]:
    """Apply pending migrations, oldest first (up to version ``until``); return those applied."""
    ledger = sql.Identifier(_LEDGER)
    applied_now: list[str] = []
    conn.commit()  # start from a clean state: the lock below outlives transactions
    was_autocommit = conn.autocommit
    conn.autocommit = True
    conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    try:
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " version text PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(ledger)
        )
        cursor = conn.execute(sql.SQL("SELECT version FROM {}").format(ledger))
        done = {str(row[0]) for row in cursor.fetchall()}  # type: ignore[index]
        record = sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(ledger)
        for version, script in available_migrations():
            if version in done:
                continue
            if until is not None and version > until:
                break
            if script.startswith(NO_TRANSACTION):
                for statement in split_statements(script):
                    conn.execute(sql.SQL(statement))
                conn.execute(record, (version,))
            else:
                with conn.transaction():
                    conn.execute(sql.SQL(script))
                    conn.execute(record, (version,))
            applied_now.append(version)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
        conn.autocommit = was_autocommit
    return applied_now


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

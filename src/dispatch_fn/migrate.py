"""Applies the plain-SQL migrations in ``migrations/`` that a database lacks."""

from __future__ import annotations

from importlib import resources

import psycopg
from psycopg import sql

_LEDGER = "duly_schema_migration"
# Two operators migrating at once take turns instead of both applying 0001.
_MIGRATION_LOCK = 0x0D01_7D15


def available_migrations() -> list[tuple[str, str]]:
    """Return ``(version, sql)`` for every bundled migration, oldest first."""
    folder = resources.files("dispatch_fn").joinpath("migrations")
    files = sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".sql")),
        key=lambda entry: entry.name,
    )
    return [(entry.name.removesuffix(".sql"), entry.read_text("utf-8")) for entry in files]


def apply_migrations(conn: psycopg.Connection[object]) -> list[str]:
    """Apply pending migrations in one transaction; return the versions applied."""
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " version text PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(_LEDGER))
        )
        cursor = conn.execute(sql.SQL("SELECT version FROM {}").format(sql.Identifier(_LEDGER)))
        done = {str(row[0]) for row in cursor.fetchall()}  # type: ignore[index]
        for version, script in available_migrations():
            if version in done:
                continue
            conn.execute(sql.SQL(script))
            conn.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(sql.Identifier(_LEDGER)),
                (version,),
            )
            applied_now.append(version)
    return applied_now

"""The physical layouts of duly_duty and duly_task a migrated database can take.

``plain`` is what the migrations build. ``partitioned`` (``layouts/
partitioned.sql``) rebuilds both tables hash-partitioned by organization_id,
the rule a sharded PostgreSQL enforces (docs/adr/0005-scale.md); the tests
and the bench select it to prove the dispatcher runs unchanged there. It is
an aid for tests and operators, never a migration: the deployed functions do
not ship it (scripts/cli_only.txt), and it applies only to tables that hold
no rows yet, since it drops and recreates them.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

import psycopg
from psycopg import sql

from dispatch_fn.db.sql import named_row
from dispatch_fn.errors import LayoutNotEmptyError, UnknownLayoutError

PLAIN: Final = "plain"
PARTITIONED: Final = "partitioned"
LAYOUTS: Final = (PLAIN, PARTITIONED)


def layout_script(name: str) -> str:
    """The text of ``layouts/<name>.sql``; empty for ``plain``, which the migrations build."""
    if name not in LAYOUTS:
        raise UnknownLayoutError(f"unknown layout {name!r}; expected one of {', '.join(LAYOUTS)}")
    if name == PLAIN:
        return ""
    return resources.files("dispatch_fn.db").joinpath("layouts", f"{name}.sql").read_text("utf-8")


def apply_layout(conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    """Give a migrated database's empty duly_duty and duly_task layout ``name``, in one transaction.

    Raises ``UnknownLayoutError`` for a name not in ``LAYOUTS`` and
    ``LayoutNotEmptyError`` (changing nothing) when either table holds a row.
    """
    script = layout_script(name)
    if not script:
        return
    with conn.transaction():
        # Taken first, so no row can arrive between the count and the rebuild.
        conn.execute("LOCK TABLE duly_duty, duly_task IN ACCESS EXCLUSIVE MODE")
        occupied = "SELECT EXISTS (SELECT 1 FROM duly_duty) OR EXISTS (SELECT 1 FROM duly_task)"
        row = named_row(conn.execute(f"{occupied} AS occupied"))
        if row is not None and row["occupied"]:
            raise LayoutNotEmptyError(
                f"layout {name!r} rebuilds duly_duty and duly_task, which hold rows;"
                " expected a freshly migrated database with neither duties nor tasks"
            )
        conn.execute(sql.SQL(script))

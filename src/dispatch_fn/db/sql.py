"""The SQL the package ships: its statement files, and the connection type they run on.

Apart from the data layer (``store``) so that the connection and migration
modules can read statement files without importing the planner behind it.
Every module that runs a statement file loads it here.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any, Final

import psycopg
from psycopg import sql

type Connection = psycopg.Connection[tuple[Any, ...]]
# A connection whatever its row factory (the login's and the demo's statements map rows by name).
type AnyConnection = psycopg.Connection[Any]


# A line that stands for another statement file's whole text: how the page
# statements share one spelling of the owed rule (statements/page_owed.sql).
_INCLUDE: Final = re.compile(r"^-- duly:include (\w+)$", re.MULTILINE)


@functools.cache
def statement_text(name: str) -> str:
    """The text of ``statements/<name>.sql``, as shipped, its ``-- duly:include`` lines expanded."""
    folder = resources.files("dispatch_fn.db").joinpath("statements")
    text = folder.joinpath(f"{name}.sql").read_text("utf-8")
    return _INCLUDE.sub(lambda line: statement_text(line.group(1)).rstrip("\n"), text)


def statement(name: str, **slots: sql.Composable) -> sql.SQL | sql.Composed:
    """``statements/<name>.sql`` as a query, its slots (identifiers only) filled.

    The files are fixed text shipped in the package, never input; values
    always travel as bound parameters, never in a slot.
    """
    text = sql.SQL(statement_text(name))
    return text.format(**slots) if slots else text


def named_row(cursor: psycopg.Cursor[Any]) -> dict[str, Any] | None:
    """The cursor's next row by column name; None when it has no more.

    For statements run through ``Connection.execute``, whose cursor keeps the
    connection's row factory: a caller that wraps ``execute`` (the bench's
    counting connection) still sees every statement.
    """
    row = cursor.fetchone()
    if row is None or cursor.description is None:
        return None
    return {column.name: value for column, value in zip(cursor.description, row, strict=True)}


def named_rows(cursor: psycopg.Cursor[Any]) -> list[dict[str, Any]]:
    """Every remaining row of the cursor by column name (``named_row``'s, for many)."""
    names = [column.name for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

"""The SQL the package ships: its statement files, and the connection type they run on.

Apart from the data layer (``store``) so that the connection and migration
modules can read statement files without importing the planner behind it.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import psycopg

type Connection = psycopg.Connection[tuple[Any, ...]]


@functools.cache
def statement_text(name: str) -> str:
    """The text of ``statements/<name>.sql``, as shipped in the package."""
    folder = resources.files("dispatch_fn").joinpath("statements")
    return folder.joinpath(f"{name}.sql").read_text("utf-8")

"""What the server receives is the statement files' own text, with only their slots filled."""

from __future__ import annotations

import inspect
import re
from datetime import UTC, datetime
from typing import Any

import psycopg

from dispatch_fn import dispatch, store
from support import duty, insert_duties

_NAMED = re.compile(r"%\(\w+\)[sb]")
_NUMBERED = re.compile(r"\$\d+")


def _placeholders_blank(text: str) -> str:
    return _NUMBERED.sub("?", _NAMED.sub("?", text))


def _received(conn: psycopg.Connection[Any]) -> str:
    # current_query() inside a statement trigger is the top-level statement's
    # text exactly as the server received it from the client.
    conn.execute("CREATE TABLE seen (query text)")
    conn.execute(
        "CREATE FUNCTION remember() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN INSERT INTO seen VALUES (current_query()); RETURN NULL; END $$"
    )
    conn.execute(
        "CREATE TRIGGER remember AFTER INSERT ON duly_task FOR EACH STATEMENT"
        " EXECUTE FUNCTION remember()"
    )
    insert_duties(conn, [duty("d1")])
    dispatch.run([conn], dispatch.RunRequest(now=datetime(2026, 8, 21, 1, tzinfo=UTC)))
    row = conn.execute("SELECT query FROM seen").fetchone()
    assert row is not None
    return str(row[0])


def test_the_page_statement_is_the_files_text_with_its_slots_filled(
    conn: psycopg.Connection[Any],
) -> None:
    received = _received(conn)
    files = "\n".join(
        store.statement_text(name) for name in ("page_owed", "page_write", "page_summary")
    )
    expected = (
        files.replace("{bounds}", "true AND true")
        .replace("{scope}", "true")
        .replace("{new_rows}", '"inserted"')
        .replace("{advanced_rows}", '"advanced"')
    )
    assert _placeholders_blank(received) == _placeholders_blank(expected)


def test_every_slot_a_statement_file_declares_is_one_the_data_layer_fills() -> None:
    declared = {"bounds", "scope", "new_rows", "advanced_rows"}
    for name in (
        "page_owed", "page_write", "page_dry_run", "page_summary", "undispatchable_counts",
        "unknown_form_ids", "dispatchable_groups", "due_rules", "fault_members", "page_bounds",
        "page_ids", "any_dispatchable", "unlocked_ids",
    ):  # fmt: skip
        slots = set(re.findall(r"(?<!%\()\{(\w+)\}", store.statement_text(name)))
        assert slots <= declared, (name, slots - declared)


def test_the_data_layer_holds_no_sql_text_of_its_own() -> None:
    source = inspect.getsource(store)
    for keyword in ("SELECT ", "INSERT ", "UPDATE ", " FROM duly_", "WITH "):
        assert keyword not in source, keyword

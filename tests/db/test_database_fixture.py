"""The test database fixture itself: isolated, migrated databases."""

from __future__ import annotations

import psycopg

from dispatch_fn.db.migrate import apply_migrations, available_migrations


def test_each_test_gets_a_migrated_empty_database(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    row = conn.execute("SELECT count(*) FROM duly_duty").fetchone()
    assert row == (0,)


def test_migrate_twice_is_a_no_op(db_url: str) -> None:
    with psycopg.connect(db_url) as connection:
        assert apply_migrations(connection) == []


def test_migrate_applies_everything_to_an_empty_database(server_dsn: str, db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as connection:
        connection.execute(
            "DROP TABLE duly_dispatch_fault, duly_dispatch_set_aside, duly_dispatch_run, duly_task,"
            " duly_duty, duly_schema_migration CASCADE"
        )
    with psycopg.connect(db_url) as connection:
        assert apply_migrations(connection) == [version for version, _ in available_migrations()]
        assert apply_migrations(connection) == []


def test_duty_pages_keep_room_for_in_place_updates(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    # Advancing last_dispatched_period stays a HOT update only while the
    # row's own page has room for its next version (migration 0002).
    # The pages are the table's, or on the partitioned layout each partition's.
    query = (
        "SELECT DISTINCT reloptions FROM pg_class WHERE relkind = 'r' AND (oid = %(t)s::regclass"
        " OR oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %(t)s::regclass))"
    )
    rows = conn.execute(query, {"t": "duly_duty"}).fetchall()
    assert rows == [(["fillfactor=50"],)]

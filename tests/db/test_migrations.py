"""Migrations: one transaction each, no-transaction files, checksums that refuse edited files."""

from __future__ import annotations

import hashlib
import threading
from importlib import resources

import psycopg
import pytest

from dispatch_fn.db.migrate import (
    Migration,
    apply_migrations,
    bundled_migrations,
    pending_migrations,
)
from dispatch_fn.engine import periods
from dispatch_fn.errors import MigrationChecksumError, MigrationError, OffsetOutOfRangeError
from dispatch_fn.planning import plan
from support import Conn

# On the run ledger, whose layout never changes: PostgreSQL builds no index
# CONCURRENTLY on a partitioned table (duly_task under DULY_LAYOUT=partitioned).
CONCURRENT_INDEX = Migration(
    "0900_run_finished_index",
    "-- duly:no-transaction\n"
    "-- Built without blocking inserts into a large table.\n"
    "CREATE INDEX CONCURRENTLY duly_run_finished ON duly_dispatch_run (finished_at);\n",
)


def _ledger(conn: Conn) -> dict[str, str | None]:
    rows = conn.execute("SELECT version, checksum FROM duly_schema_migration").fetchall()
    return {str(version): checksum for version, checksum in rows}


def _index_is_valid(conn: Conn, name: str) -> bool | None:
    row = conn.execute(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
    ).fetchone()
    return None if row is None else bool(row[0])


def test_every_applied_migration_records_the_sha256_of_its_file(conn: Conn) -> None:
    folder = resources.files("dispatch_fn.db").joinpath("migrations")
    expected = {
        entry.name.removesuffix(".sql"): hashlib.sha256(entry.read_bytes()).hexdigest()
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }
    assert _ledger(conn) == expected


def test_nothing_pending_is_a_no_op(conn: Conn) -> None:
    assert pending_migrations(conn) == []
    assert apply_migrations(conn) == []


def test_a_no_transaction_migration_builds_an_index_concurrently(conn: Conn) -> None:
    migrations = [*bundled_migrations(), CONCURRENT_INDEX]
    assert pending_migrations(conn, migrations) == ["0900_run_finished_index"]
    assert apply_migrations(conn, migrations) == ["0900_run_finished_index"]
    assert _index_is_valid(conn, "duly_run_finished") is True
    assert _ledger(conn)["0900_run_finished_index"] == CONCURRENT_INDEX.checksum
    assert apply_migrations(conn, migrations) == []


def test_each_statement_of_a_no_transaction_migration_commits_alone(conn: Conn) -> None:
    # The second statement fails; the first, already committed, stays.
    two = Migration(
        "0900_two_steps",
        "-- duly:no-transaction\n"
        "CREATE INDEX CONCURRENTLY duly_run_finished ON duly_dispatch_run (finished_at);\n"
        "CREATE INDEX CONCURRENTLY duly_run_finished ON duly_dispatch_run (finished_at);\n",
    )
    with pytest.raises(MigrationError, match=r"'0900_two_steps' failed: .*already exists"):
        apply_migrations(conn, [*bundled_migrations(), two])
    assert _index_is_valid(conn, "duly_run_finished") is True
    assert "0900_two_steps" not in _ledger(conn)


def test_a_non_autocommit_connection_is_restored_after_migrating(db_url: str) -> None:
    with psycopg.connect(db_url) as connection:
        assert apply_migrations(connection, [*bundled_migrations(), CONCURRENT_INDEX]) == [
            "0900_run_finished_index"
        ]
        assert connection.autocommit is False


def test_concurrently_without_the_header_fails_naming_the_migration_and_records_nothing(
    conn: Conn,
) -> None:
    unmarked = Migration("0900_run_finished_index", CONCURRENT_INDEX.script.partition("\n")[2])
    with pytest.raises(
        MigrationError, match=r"'0900_run_finished_index' failed: .*transaction block"
    ):
        apply_migrations(conn, [*bundled_migrations(), unmarked])
    assert "0900_run_finished_index" not in _ledger(conn)


def test_an_edited_applied_migration_is_refused_and_nothing_runs(conn: Conn) -> None:
    edited = [
        Migration(each.version, each.script + "\n-- edited\n")
        if each.version == "0001_schema"
        else each
        for each in bundled_migrations()
    ]
    with pytest.raises(MigrationChecksumError, match=r"'0001_schema' was applied with checksum"):
        apply_migrations(conn, [*edited, CONCURRENT_INDEX])
    assert _index_is_valid(conn, "duly_run_finished") is None
    assert "0900_run_finished_index" not in _ledger(conn)


def test_a_failed_migration_keeps_the_earlier_ones_and_rolls_itself_back(conn: Conn) -> None:
    good = Migration("0900_good", "CREATE TABLE duly_good (id int);")
    bad = Migration("0901_bad", "CREATE TABLE duly_half (id int);\nSELECT 1 / 0;")
    with pytest.raises(MigrationError, match=r"'0901_bad' failed: division by zero"):
        apply_migrations(conn, [*bundled_migrations(), good, bad])
    assert "0900_good" in _ledger(conn)
    assert "0901_bad" not in _ledger(conn)
    present = conn.execute("SELECT to_regclass('duly_good'), to_regclass('duly_half')").fetchone()
    assert present == ("duly_good", None)


def test_a_ledger_from_before_checksums_gains_them_from_the_files_as_they_are(
    conn: Conn,
) -> None:
    conn.execute("ALTER TABLE duly_schema_migration DROP COLUMN checksum")
    assert apply_migrations(conn) == []
    assert _ledger(conn) == {each.version: each.checksum for each in bundled_migrations()}


def test_two_migrators_at_once_apply_each_migration_once(db_url: str) -> None:
    migrations = [*bundled_migrations(), CONCURRENT_INDEX, Migration("0901_t", "SELECT 1;")]
    results: list[list[str]] = []
    barrier = threading.Barrier(2)

    def migrate() -> None:
        with psycopg.connect(db_url, autocommit=True) as connection:
            barrier.wait()
            results.append(apply_migrations(connection, migrations))

    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [[], ["0900_run_finished_index", "0901_t"]]


def _engine_accepts(anchor: str, days: int, months: int, grace: int) -> bool:
    try:
        periods.check_due_rule(anchor, days, months)
        periods.check_grace_days(grace)
    except OffsetOutOfRangeError:
        return False
    return True


def _around(limit: int) -> list[int]:
    return [-1, 0, 1, limit - 1, limit, limit + 1]


def test_the_due_rule_range_in_sql_is_the_engines_at_every_limit(conn: Conn) -> None:
    # Migration 0010 spells periods' limits as numbers; each limit, and one
    # past it either side, is judged alike, so the two cannot drift apart.
    cases = [
        (anchor, days, months, grace)
        for anchor in periods.ANCHORS
        for days in _around(periods.MAX_DAYS_AFTER_PERIOD)
        for months in _around(periods.MAX_MONTHS_AFTER_PERIOD)
        for grace in _around(periods.MAX_GRACE_DAYS)
    ]
    anchors, days, months, graces = (list(column) for column in zip(*cases, strict=True))
    judged = conn.execute(
        "SELECT duly_due_rule_in_range(a, d, m, g)"
        " FROM unnest(%s::text[], %s::int[], %s::int[], %s::int[]) WITH ORDINALITY"
        " AS c(a, d, m, g, n) ORDER BY n",
        (anchors, days, months, graces),
    ).fetchall()
    assert [bool(row[0]) for row in judged] == [_engine_accepts(*case) for case in cases]


def test_the_dispatchable_predicate_in_sql_is_the_planners_for_every_combination(
    conn: Conn,
) -> None:
    values = {
        "form": (*plan.FORMS, "weekly", None),
        "status": ("active", "paused", "retired", None),
        "review_status": (plan.APPROVED, "to_review", "returned", None),
    }
    cases = [
        (form, status, review)
        for form in values["form"]
        for status in values["status"]
        for review in values["review_status"]
    ]
    forms, statuses, reviews = (list(column) for column in zip(*cases, strict=True))
    judged = conn.execute(
        "SELECT coalesce(duly_dispatchable(s, f, r), false)"
        " FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY"
        " AS c(f, s, r, n) ORDER BY n",
        (forms, statuses, reviews),
    ).fetchall()
    assert [bool(row[0]) for row in judged] == [
        plan.classify(form, status, review) is None for form, status, review in cases
    ]

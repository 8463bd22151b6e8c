"""What the server receives is the statement files' own text, with only their slots filled."""

from __future__ import annotations

import inspect
import re
from typing import Any

import psycopg

from dispatch_fn import database, dispatch, migrate, plan, store
from dispatch_fn._sql import statement_text
from support import NOW, duty, insert_duties

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
    dispatch.run([conn], dispatch.RunRequest(now=NOW))
    row = conn.execute("SELECT query FROM seen").fetchone()
    assert row is not None
    return str(row[0])


def test_the_page_statement_is_the_files_text_with_its_slots_filled(
    conn: psycopg.Connection[Any],
) -> None:
    received = _received(conn)
    files = "\n".join(statement_text(name) for name in ("page_owed", "page_write", "page_summary"))
    expected = (
        files.replace("{bounds}", "true AND true")
        .replace("{scope}", "true")
        .replace("{new_rows}", '"inserted"')
        .replace("{advanced_rows}", '"advanced"')
    )
    assert _placeholders_blank(received) == _placeholders_blank(expected)


def test_every_slot_a_statement_file_declares_is_one_the_data_layer_fills() -> None:
    declared = {"bounds", "scope", "new_rows", "advanced_rows", "ledger"}
    for name in (
        "page_owed", "page_write", "page_dry_run", "page_summary", "undispatchable_counts",
        "unknown_form_ids", "dispatchable_groups", "due_rules", "fault_members", "page_bounds",
        "page_ids", "page_taken", "any_dispatchable", "unlocked_ids", "session_ping",
        "statement_time_limit", "migration_ledger", "migration_ledger_exists",
        "migration_ledger_read", "migration_ledger_adopt", "migration_record", "migration_lock",
        "migration_unlock", "page_dry_run_plan",
    ):  # fmt: skip
        slots = set(re.findall(r"(?<!%\()\{(\w+)\}", statement_text(name)))
        assert slots <= declared, (name, slots - declared)


def test_the_data_layer_holds_no_sql_text_of_its_own() -> None:
    for module in (store, migrate, database):
        source = inspect.getsource(module)
        for keyword in ("SELECT ", "INSERT ", "UPDATE ", " FROM duly_", "WITH ", "CREATE TABLE"):
            assert keyword not in source, (module.__name__, keyword)


def _last_statement(observer: psycopg.Connection[Any], session: psycopg.Connection[Any]) -> str:
    # An idle backend's pg_stat_activity.query is the last statement it received.
    row = observer.execute(
        "SELECT query FROM pg_stat_activity WHERE pid = %s", (session.info.backend_pid,)
    ).fetchone()
    assert row is not None
    return str(row[0])


def _ledger_text(name: str) -> str:
    return statement_text(name).replace("{ledger}", f'"{migrate.LEDGER}"')


def test_the_session_ping_and_the_migration_lock_are_the_files_text(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    with psycopg.connect(db_url, autocommit=True) as session:
        assert database._alive(session)
        assert _last_statement(conn, session) == statement_text("session_ping")
        migrate.apply_migrations(session)  # nothing pending: lock, ledger, unlock
        assert _placeholders_blank(_last_statement(conn, session)) == _placeholders_blank(
            statement_text("migration_unlock")
        )
        assert migrate.pending_migrations(session) == []
        assert _last_statement(conn, session) == _ledger_text("migration_ledger_read")


def test_the_migration_ledgers_statements_are_the_files_text(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    # A database never migrated; an event trigger sees the ledger's DDL, then a
    # statement trigger on the ledger sees its rows being written.
    conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    conn.execute("CREATE TABLE seen (query text)")
    conn.execute(
        "CREATE FUNCTION remember() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN INSERT INTO seen VALUES (current_query()); RETURN NULL; END $$"
    )
    conn.execute(
        "CREATE FUNCTION remember_ddl() RETURNS event_trigger LANGUAGE plpgsql AS"
        " $$ BEGIN INSERT INTO seen VALUES (current_query()); END $$"
    )
    conn.execute(
        "CREATE EVENT TRIGGER remember_ddl ON ddl_command_end"
        " WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE') EXECUTE FUNCTION remember_ddl()"
    )
    probe = migrate.Migration("0000_probe", "SELECT 1")
    try:
        with psycopg.connect(db_url, autocommit=True) as session:
            assert migrate.pending_migrations(session, [probe]) == ["0000_probe"]
            assert _placeholders_blank(_last_statement(conn, session)) == _placeholders_blank(
                statement_text("migration_ledger_exists")
            )
            migrate.apply_migrations(session, [probe])
            conn.execute("DROP EVENT TRIGGER remember_ddl")
            ddl = {str(row[0]) for row in conn.execute("SELECT query FROM seen")}
            assert ddl == {_ledger_text("migration_ledger")}
            conn.execute("TRUNCATE seen")
            conn.execute(
                f"CREATE TRIGGER remember AFTER INSERT OR UPDATE ON {migrate.LEDGER}"
                " FOR EACH STATEMENT EXECUTE FUNCTION remember()"
            )
            # Recorded before checksums existed: the run adopts the file's checksum.
            conn.execute(f"UPDATE {migrate.LEDGER} SET checksum = NULL")
            conn.execute("TRUNCATE seen")
            migrate.apply_migrations(session, [probe, migrate.Migration("0001_probe", "SELECT 2")])
    finally:
        conn.execute("DROP EVENT TRIGGER IF EXISTS remember_ddl")
    seen = [_placeholders_blank(str(row[0])) for row in conn.execute("SELECT query FROM seen")]
    assert seen == [
        _placeholders_blank(_ledger_text(name))
        for name in ("migration_ledger_adopt", "migration_record")
    ]


def test_a_dry_page_turns_seq_scans_off_for_its_own_transaction_only(
    conn: psycopg.Connection[Any],
) -> None:
    # page_dry_run_plan.sql is SET LOCAL: the warm connection's next statement
    # (a real run's page, on the same Lambda container) is planned as usual.
    insert_duties(conn, [duty("d1")])
    report = dispatch.run([conn], dispatch.RunRequest(now=NOW, dry_run=True))
    assert report.tasks_created == 1
    assert conn.execute("SHOW enable_seqscan").fetchone() == ("on",)
    assert statement_text("page_dry_run_plan").strip().endswith("SET LOCAL enable_seqscan = off")


def test_groups_with_equal_schedules_send_their_periods_once() -> None:
    # Two zones on the same local date at the clock, in two lead buckets of
    # one of them, plan equal monthly schedules; a zone still on the day
    # before (Los Angeles at 01:00 UTC) does not.
    zones = ("Europe/Paris", "Europe/Berlin", "America/Los_Angeles")
    ready = [
        (store.Group("monthly", zone, bucket, 1, 0), plan.schedule_for("monthly", zone, NOW))
        for zone, bucket in ((zones[0], 0), (zones[0], 3), (zones[1], 0), (zones[2], 0))
    ]
    first = ready[0][1]
    assert ready[1][1] == ready[2][1] == first != ready[3][1]

    params = store.page_statement(store.Scope(), ready, store.Rules(), dry_run=False).params

    assert params["c_schedule"] == [0, 0, 0, 1]
    assert len(params["p_key"]) == len(first.periods) + len(ready[3][1].periods)

"""The dispatcher's database role (migrations 0005 and 0009): enough for a run, nothing else.

Runs log in as ``duly_dispatcher_test``, a member of the database's own
dispatcher role (``duly_dispatcher_role()``) only; the test's own ``conn`` is
the owner that applied the migrations.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import errors as pg_errors

from dispatch_fn.aws import parse_event
from dispatch_fn.run import dispatch
from support import CLOCK, Conn, Invoke, duty, insert_duties, last_dispatched, task_keys

SHARED_ROLE = "duly_dispatcher"


@pytest.fixture
def as_dispatcher(dispatcher_url: str) -> Iterator[Conn]:
    """An autocommit connection logged in as the dispatcher's role."""
    with psycopg.connect(dispatcher_url, autocommit=True) as connection:
        yield connection


def _run_one(conn: Conn, as_dispatcher: Conn) -> None:
    insert_duties(conn, [duty("d1"), duty("d2", frequency="weekly")])
    request = parse_event({"now": CLOCK}, current_time=datetime.now(UTC))
    dispatch([as_dispatcher], request)


def test_the_login_is_the_dispatcher_role_and_nothing_more(
    as_dispatcher: Conn, dispatcher_role: str
) -> None:
    row = as_dispatcher.execute(
        "SELECT current_user, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls,"
        " array(SELECT m.roleid::regrole::text FROM pg_auth_members m WHERE m.member = r.oid)"
        " FROM pg_roles r WHERE r.rolname = current_user"
    ).fetchone()
    assert row == ("duly_dispatcher_test", False, False, False, False, [dispatcher_role])


def test_a_run_as_the_dispatcher_role_creates_tasks_and_advances_duties(
    conn: Conn, as_dispatcher: Conn
) -> None:
    _run_one(conn, as_dispatcher)
    assert task_keys(conn) == ["2026-08", "2026-W34", "2026-W35"]
    assert last_dispatched(conn) == {"d1": "2026-08", "d2": "2026-W35"}


def test_the_handler_runs_as_the_dispatcher_role(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1")])
    assert invoke({"now": CLOCK})["tasks_created"] == 1
    # And a re-run after an edit, which reads the duty, finds its task and
    # writes its account (dispatch_next with it), is as allowed.
    conn.execute("UPDATE duly_duty SET grace_days = grace_days + 1 WHERE id = 'd1'")
    again = invoke({"now": CLOCK})
    assert (again["tasks_created"], again["tasks_existing"], again["accounts_kept"]) == (0, 1, 1)


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("UPDATE duly_duty SET name = 'renamed'", id="rename-a-duty"),
        pytest.param("UPDATE duly_duty SET status = 'retired'", id="retire-a-duty"),
        pytest.param("DELETE FROM duly_duty", id="delete-a-duty"),
        pytest.param(
            "INSERT INTO duly_duty (id, organization_id, name, owner_id, source)"
            " VALUES ('x', 'o', 'n', 'w', 'self')",
            id="insert-a-duty",
        ),
        pytest.param("DELETE FROM duly_task", id="delete-a-task"),
        pytest.param("UPDATE duly_task SET status = 'done'", id="update-a-task"),
        pytest.param("TRUNCATE duly_task", id="truncate-tasks"),
        pytest.param("CREATE TABLE duly_intruder (id int)", id="create-a-table"),
        pytest.param("ALTER TABLE duly_task ADD COLUMN extra text", id="alter-a-table"),
        pytest.param("DROP TABLE duly_task", id="drop-a-table"),
        pytest.param("DELETE FROM duly_schema_migration", id="touch-the-migration-ledger"),
        pytest.param("UPDATE duly_dispatch_fault SET since = now()", id="rewrite-a-faults-start"),
    ],
)
def test_the_dispatcher_role_is_refused_everything_a_run_does_not_do(
    conn: Conn, as_dispatcher: Conn, statement: str
) -> None:
    _run_one(conn, as_dispatcher)
    refused = (pg_errors.InsufficientPrivilege, pg_errors.WrongObjectType)
    with pytest.raises(refused):
        as_dispatcher.execute(statement)
    assert task_keys(conn) == ["2026-08", "2026-W34", "2026-W35"]


def test_the_grants_are_exactly_the_ones_a_run_needs(conn: Conn, dispatcher_role: str) -> None:
    tables = conn.execute(
        "SELECT table_name, privilege_type FROM information_schema.table_privileges"
        " WHERE grantee = %s ORDER BY 1, 2",
        (dispatcher_role,),
    ).fetchall()
    expected = [("duly_duty", "SELECT"), ("duly_task", "INSERT"), ("duly_task", "SELECT")]
    ledger = conn.execute("SELECT to_regclass('duly_dispatch_run') IS NOT NULL").fetchone()
    if ledger == (True,):
        # Once migration 0004 is in, the run ledger is read, started and finished.
        ledger_grants = [("duly_dispatch_run", p) for p in ("INSERT", "SELECT", "UPDATE")]
        # Migration 0008: the set-aside duties are recorded and read.
        set_aside = [("duly_dispatch_set_aside", p) for p in ("INSERT", "SELECT")]
        # Migration 0013: faults are added to and removed from the account, never updated.
        account = [("duly_dispatch_fault", p) for p in ("DELETE", "INSERT", "SELECT")]
        expected = sorted([*expected, *ledger_grants, *set_aside, *account])
    assert [tuple(row) for row in tables] == expected
    updates = conn.execute(
        "SELECT table_name, column_name FROM information_schema.column_privileges"
        " WHERE grantee = %s AND privilege_type = 'UPDATE' AND table_name <> 'duly_dispatch_run'",
        (dispatcher_role,),
    ).fetchall()
    # Migration 0012: the duty's account, beside last_dispatched_period; the
    # set-aside ledger is no longer marked repaid. Migration 0014: its next owed
    # day; 0016: the spans its resumes opened; 0017: the day of a change
    # that replaced a cadence which still owed.
    assert sorted(tuple(row) for row in updates) == [
        ("duly_duty", "dispatch_changed_on"),
        ("duly_duty", "dispatch_next"),
        ("duly_duty", "dispatch_next_at"),
        ("duly_duty", "dispatch_owed_between"),
        ("duly_duty", "dispatch_paused_on"),
        ("duly_duty", "dispatch_recast_on"),
        ("duly_duty", "dispatch_through"),
        ("duly_duty", "last_dispatched_period"),
    ]
    owned = conn.execute(
        "SELECT count(*) FROM pg_class WHERE relowner = %s::regrole", (dispatcher_role,)
    ).fetchone()
    assert owned == (0,)
    sequences = conn.execute(
        "SELECT count(*) FROM pg_class c"
        " WHERE CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(%s, c.oid, 'USAGE') END",
        (dispatcher_role,),
    ).fetchone()
    assert sequences == (0,)


def test_the_dispatcher_role_may_call_the_period_order_function(as_dispatcher: Conn) -> None:
    # page_write.sql orders keys with it (migration 0007); EXECUTE is PUBLIC's.
    row = as_dispatcher.execute("SELECT duly_period_first_day('2026-W46')").fetchone()
    assert row is not None
    assert str(row[0]) == "2026-11-09"


def test_the_cluster_wide_role_holds_nothing_in_a_migrated_database(conn: Conn) -> None:
    # 0005's grants moved to the database's own role (0009): a login left in
    # duly_dispatcher reaches no table here.
    held = conn.execute(
        "SELECT count(*) FROM information_schema.table_privileges WHERE grantee = %s",
        (SHARED_ROLE,),
    ).fetchone()
    columns = conn.execute(
        "SELECT count(*) FROM information_schema.column_privileges WHERE grantee = %s",
        (SHARED_ROLE,),
    ).fetchone()
    assert (held, columns) == ((0,), (0,))

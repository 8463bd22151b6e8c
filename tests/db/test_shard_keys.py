"""Keys a sharded PostgreSQL enforces: migration 0011, and the partitioned layout proving them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from dispatch_fn.cli import exit_status
from dispatch_fn.db import dispatch_page
from dispatch_fn.db.layout import LAYOUTS, PARTITIONED, PLAIN, apply_layout
from dispatch_fn.db.migrate import apply_migrations, bundled_migrations, split_statements
from dispatch_fn.errors import LayoutNotEmptyError, MigrationError, UnknownLayoutError
from dispatch_fn.planning import RunRequest, Scope, Window
from dispatch_fn.run import dispatch, dispatch_recorded, explain, render_explanation
from runtimes import runtime
from support import (
    NOW,
    Conn,
    cloned_database,
    duty,
    insert_duties,
    last_dispatched,
    refuse_tasks,
)

SHARD_KEYS = "0011_shard_keys"
TABLES = ("duly_duty", "duly_task")


@contextmanager
def _new_database(server_dsn: str) -> Iterator[str]:
    """An empty database of its own, dropped on leaving, its dispatcher role (0009) with it."""
    name = f"duly_s_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_conninfo(server_dsn, dbname=name)
    try:
        yield dsn
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrated = conn.execute("SELECT to_regproc('duly_dispatcher_role')").fetchone()
            role = None
            if migrated is not None and migrated[0] is not None:
                role = conn.execute("SELECT duly_dispatcher_role()").fetchone()
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            if role is not None:
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role[0])))


@pytest.fixture(scope="module")
def layouts(server_dsn: str) -> Iterator[dict[str, str]]:
    """One migrated, empty template database per layout, whatever the session's layout."""
    with _new_database(server_dsn) as plain, _new_database(server_dsn) as partitioned:
        for dsn, layout in ((plain, PLAIN), (partitioned, PARTITIONED)):
            with psycopg.connect(dsn) as conn:
                apply_migrations(conn)
                apply_layout(conn, layout)
        yield {PLAIN: _name(plain), PARTITIONED: _name(partitioned)}


def _name(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


@contextmanager
def _connect(server_dsn: str, layouts: dict[str, str], layout: str) -> Iterator[Conn]:
    with (
        cloned_database(server_dsn, layouts[layout]) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        yield conn


@contextmanager
def _holding(
    server_dsn: str, layouts: dict[str, str], duties: list[dict[str, Any]]
) -> Iterator[tuple[Conn, Conn]]:
    """A partitioned database holding ``duties``, and a second session to hold rows locked."""
    with (
        _connect(server_dsn, layouts, PARTITIONED) as conn,
        psycopg.connect(conn.info.dsn) as holder,
    ):
        insert_duties(conn, duties)
        yield conn, holder


def _lock(holder: Conn, organization_id: str, duty_id: str) -> None:
    holder.execute(
        "SELECT id FROM duly_duty WHERE organization_id = %s AND id = %s FOR UPDATE",
        (organization_id, duty_id),
    )


def _constraints(conn: Conn, table: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'f') ORDER BY 1",
        (table,),
    ).fetchall()
    return {str(name): str(definition) for name, definition in rows}


# --- migration 0011 on the plain layout ---


def test_the_migration_makes_the_duty_key_and_the_task_foreign_key_carry_the_organisation(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with _connect(server_dsn, layouts, PLAIN) as conn:
        assert _constraints(conn, "duly_duty") == {
            "duly_duty_organization_key": "UNIQUE (organization_id, id)",
            "duly_duty_pkey": "PRIMARY KEY (id)",
        }
        assert _constraints(conn, "duly_task") == {
            "duly_task_dispatch_identity": (
                "UNIQUE (organization_id, duty_id, owner_id, period_key)"
            ),
            "duly_task_duty": (
                "FOREIGN KEY (organization_id, duty_id) REFERENCES duly_duty(organization_id, id)"
            ),
            "duly_task_pkey": "PRIMARY KEY (id)",
        }
        validated = conn.execute(
            "SELECT convalidated FROM pg_constraint WHERE conname = 'duly_task_duty'"
        ).fetchone()
        assert validated == (True,)
        # The unique index took the old one's place: scoped runs walk it.
        indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'duly_duty' ORDER BY 1"
        ).fetchall()
        assert [row[0] for row in indexes] == [
            "duly_duty_left_out",
            "duly_duty_next_at",
            "duly_duty_organization_key",
            "duly_duty_pkey",
        ]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_task_of_another_organisation_than_its_duty_is_refused(
    server_dsn: str, layouts: dict[str, str], layout: str
) -> None:
    with _connect(server_dsn, layouts, layout) as conn:
        insert_duties(conn, [duty("d1", organization_id="org-1")])
        task = (
            "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source,"
            " period_key, due_date, visible_from, late_after)"
            " VALUES (%s, 'd1', 'owner-1', 's', 'catalog', '2026-08', '2026-08-01',"
            " '2026-07-25', '2026-08-01')"
        )
        with pytest.raises(pg_errors.ForeignKeyViolation, match="duly_task_duty"):
            conn.execute(task, ("org-2",))
        conn.execute(task, ("org-1",))
        # Nor can a duty with tasks move to another organisation (another shard).
        with pytest.raises(pg_errors.ForeignKeyViolation):
            conn.execute("UPDATE duly_duty SET organization_id = 'org-2' WHERE id = 'd1'")


def test_the_migration_validates_the_tasks_already_stored(server_dsn: str) -> None:
    with _new_database(server_dsn) as dsn, psycopg.connect(dsn) as conn:
        apply_migrations(conn, until="0010_dispatch_rules")
        insert_duties(conn, [duty("d1", organization_id="org-1")])
        task = (
            "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source,"
            " period_key, due_date, visible_from, late_after)"
            " VALUES (%s, 'd1', 'owner-1', 's', 'catalog', %s, '2026-08-01',"
            " '2026-07-25', '2026-08-01')"
        )
        conn.execute(task, ("org-1", "2026-07"))
        # Written before the key existed: a duty moved to org-2 after this task.
        conn.execute(task, ("org-9", "2026-08"))
        conn.commit()
        with pytest.raises(MigrationError, match=r"0011_shard_keys.*duly_task_duty"):
            apply_migrations(conn)
        # New rows are already checked; the migration is not recorded; the old key still holds.
        row = conn.execute(
            "SELECT convalidated FROM pg_constraint WHERE conname = 'duly_task_duty'"
        ).fetchone()
        assert row == (False,)
        assert SHARD_KEYS not in {
            str(r[0]) for r in conn.execute("SELECT version FROM duly_schema_migration")
        }
        # The operator settles the stray task; the migration is re-run from its start.
        conn.execute(
            "UPDATE duly_task SET organization_id = 'org-1' WHERE organization_id = 'org-9'"
        )
        conn.commit()
        assert apply_migrations(conn, until=SHARD_KEYS) == [SHARD_KEYS]
        assert "duly_task_duty_id_fkey" not in _constraints(conn, "duly_task")


def test_a_migration_killed_half_way_is_re_run_from_its_start(server_dsn: str) -> None:
    (shard_keys,) = [each for each in bundled_migrations() if each.version == SHARD_KEYS]
    with _new_database(server_dsn) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        apply_migrations(conn, until="0010_dispatch_rules")
        # Every statement but the last two committed, then the process died.
        for statement in split_statements(shard_keys.script)[:-2]:
            conn.execute(sql.SQL(statement))
        assert apply_migrations(conn, until=SHARD_KEYS) == [SHARD_KEYS]
        assert set(_constraints(conn, "duly_task")) == {
            "duly_task_dispatch_identity",
            "duly_task_duty",
            "duly_task_pkey",
        }
        gone = conn.execute("SELECT to_regclass('duly_duty_organization')").fetchone()
        assert gone == (None,)


# --- the partitioned layout ---


def test_on_the_partitioned_layout_every_unique_index_includes_the_organisation(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        partitioned = conn.execute(
            "SELECT c.relname, p.partstrat, a.attname, count(i.inhrelid)"
            " FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid"
            " JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]"
            " LEFT JOIN pg_inherits i ON i.inhparent = p.partrelid"
            " GROUP BY 1, 2, 3 ORDER BY 1"
        ).fetchall()
        assert [tuple(row) for row in partitioned] == [
            ("duly_duty", "h", "organization_id", 8),
            ("duly_task", "h", "organization_id", 8),
        ]
        unique = conn.execute(
            "SELECT x.indexrelid::regclass::text,"
            "       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = x.indrelid"
            "               AND a.attname = 'organization_id' AND a.attnum = ANY(x.indkey))"
            " FROM pg_index x"
            " WHERE x.indisunique AND x.indrelid IN ("
            "     SELECT relid FROM pg_partition_tree('duly_duty')"
            "     UNION ALL SELECT relid FROM pg_partition_tree('duly_task'))"
        ).fetchall()
        # Parent and eight partitions each: the duties' key, the tasks' key and identity.
        assert len(unique) == 9 * 1 + 9 * 2
        assert [name for name, carries in unique if not carries] == []


def _shape(conn: Conn) -> dict[str, Any]:
    """What the two layouts must share, read from the catalog: all but the keys and partitions."""
    columns = conn.execute(
        "SELECT table_name, ordinal_position, column_name, data_type, character_maximum_length,"
        " column_default, is_nullable, is_identity, identity_generation"
        " FROM information_schema.columns WHERE table_name = ANY(%s) ORDER BY 1, 2",
        (list(TABLES),),
    ).fetchall()
    checks = conn.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = ANY(%s::regclass[]) AND contype = 'c' ORDER BY 1, 2",
        (list(TABLES),),
    ).fetchall()
    indexes = conn.execute(
        "SELECT indexname, regexp_replace(indexdef, ' ON (ONLY )?public\\.\\S+ USING', ' USING')"
        " FROM pg_indexes i JOIN pg_index x ON x.indexrelid = to_regclass(i.indexname)"
        " WHERE i.tablename = ANY(%s) AND NOT x.indisunique ORDER BY 1",
        (list(TABLES),),
    ).fetchall()
    storage = conn.execute(
        # The tables that hold the rows: the plain table, or each partition.
        "SELECT DISTINCT t.name, c.reloptions FROM unnest(%s::text[]) t(name), pg_class c"
        " WHERE c.relkind = 'r' AND (c.oid = t.name::regclass OR c.oid IN ("
        "     SELECT inhrelid FROM pg_inherits WHERE inhparent = t.name::regclass))"
        " ORDER BY 1",
        (list(TABLES),),
    ).fetchall()
    grants = conn.execute(
        "SELECT table_name, privilege_type FROM information_schema.table_privileges"
        " WHERE grantee = duly_dispatcher_role() ORDER BY 1, 2"
    ).fetchall()
    column_grants = conn.execute(
        "SELECT table_name, column_name, privilege_type FROM information_schema.column_privileges"
        " WHERE grantee = duly_dispatcher_role() AND privilege_type <> 'SELECT'"
        "   AND table_name = ANY(%s) ORDER BY 1, 2, 3",
        (list(TABLES),),
    ).fetchall()
    triggers = conn.execute(
        "SELECT event_object_table, trigger_name, action_timing, event_manipulation,"
        " action_statement FROM information_schema.triggers"
        " WHERE event_object_table = ANY(%s) ORDER BY 1, 2, 4",
        (list(TABLES),),
    ).fetchall()
    sequences = conn.execute(
        "SELECT pg_get_serial_sequence('duly_task', 'id'), "
        " has_sequence_privilege(duly_dispatcher_role(), 'duly_task_id_seq', 'USAGE')"
    ).fetchone()
    return {
        "columns": [tuple(row) for row in columns],
        "checks": [tuple(row) for row in checks],
        "indexes": [tuple(row) for row in indexes],
        "storage": [tuple(row) for row in storage],
        "grants": [tuple(row) for row in grants],
        "column_grants": [tuple(row) for row in column_grants],
        "triggers": [tuple(row) for row in triggers],
        "sequence": sequences,
    }


def test_the_partitioned_layout_keeps_every_column_check_index_option_and_grant(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with (
        _connect(server_dsn, layouts, PLAIN) as plain,
        _connect(server_dsn, layouts, PARTITIONED) as partitioned,
    ):
        expected = _shape(plain)
        # duly_duty's 21 and its account's 10 (migrations 0012, 0014, 0016,
        # 0017, 0019, 0026), duly_task's 13.
        assert len(expected["columns"]) == 21 + 10 + 13
        assert {row[1] for row in expected["triggers"]} == {"duly_duty_account"}
        assert ("duly_duty", ["fillfactor=50"]) in expected["storage"]
        assert _shape(partitioned) == expected


def test_a_layout_refuses_tables_that_hold_rows(server_dsn: str, layouts: dict[str, str]) -> None:
    with _connect(server_dsn, layouts, PLAIN) as conn:
        insert_duties(conn, [duty("d1")])
        with pytest.raises(LayoutNotEmptyError):
            apply_layout(conn, PARTITIONED)
        assert conn.execute(
            "SELECT relkind FROM pg_class WHERE relname = 'duly_duty'"
        ).fetchone() == ("r",)
        with pytest.raises(UnknownLayoutError, match="'sharded'"):
            apply_layout(conn, "sharded")


# --- the dispatcher on both layouts ---

ZONES = ("UTC", "Europe/Berlin", "Asia/Kolkata", "America/Los_Angeles", "Pacific/Kiritimati")
FREQUENCIES = ("daily", "weekly", "fortnightly", "monthly", "quarterly", "half_yearly", "annual")
BACKFILL = Window(date(2025, 1, 1), date(2026, 6, 30))


def _duties() -> list[dict[str, Any]]:
    """Duties of twenty organisations (in every partition), of every shape the runs write."""
    shapes: list[dict[str, Any]] = [
        {},
        {"due_anchor": "period_end", "due_offset_days": -3},
        {"due_anchor": "after_period_end", "due_offset_months": 1, "due_offset_days": 15},
        {"due_roll": "following", "holiday_calendar": "DE-BY", "grace_days": 5},
        {"due_roll": "modified_following", "holiday_calendar": "GB-SCT"},
        {"review_status": "to_review"},
        {"effective_from": date(2025, 6, 1), "effective_to": date(2026, 3, 31)},
    ]
    return [
        duty(
            f"d{n:04}",
            organization_id=f"org-{n % 20:02}",
            owner_id=f"owner-{n % 7}",
            frequency=FREQUENCIES[n % len(FREQUENCIES)],
            timezone=ZONES[n % len(ZONES)],
            lead_days=n % 30,
            **shapes[n % len(shapes)],
        )
        for n in range(600)
    ]


def _dispatch(conn: Conn, helper: Conn) -> tuple[list[tuple[Any, ...]], dict[str, str | None]]:
    insert_duties(conn, _duties())
    # Small pages, shared by two connections: many pages, each reaching several partitions.
    small = runtime(chunk_size=50)
    dispatch([conn, helper], RunRequest(now=NOW), small)
    dispatch(
        [conn, helper],
        RunRequest(now=datetime(2026, 8, 22, 1, tzinfo=UTC), window=BACKFILL),
        small,
    )
    rows = conn.execute(
        "SELECT * FROM duly_task ORDER BY organization_id, duty_id, owner_id, period_key"
    )
    names = [column.name for column in rows.description or ()]
    kept = [i for i, name in enumerate(names) if name not in {"id", "created_at"}]
    return [tuple(row[i] for i in kept) for row in rows.fetchall()], last_dispatched(conn)


def test_a_scheduled_run_and_a_backfill_write_the_same_rows_on_both_layouts(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    written = {}
    for layout in LAYOUTS:
        with (
            cloned_database(server_dsn, layouts[layout]) as dsn,
            psycopg.connect(dsn, autocommit=True) as conn,
            psycopg.connect(dsn, autocommit=True) as helper,
        ):
            written[layout] = _dispatch(conn, helper)
            if layout == PARTITIONED:
                spread = conn.execute("SELECT count(DISTINCT tableoid) FROM duly_task").fetchone()
                assert spread == (8,)
    rows, marks = written[PLAIN]
    assert len(rows) > 5_000
    assert sum(1 for mark in marks.values() if mark is not None) > 400
    assert written[PARTITIONED] == written[PLAIN]


# Issue 37's defect 5: on the partitioned layout the duty's key is
# (organization_id, id), so two organisations may hold one id. A page boundary
# that fell between them lost the second: the next page starts after the id.
REPEATED = (("org-a", "d1"), ("org-a", "d2"), ("org-b", "d2"), ("org-b", "d3"))


def _repeated() -> list[dict[str, Any]]:
    """A daily duty of each key of REPEATED."""
    return [duty(id_, organization_id=org, frequency="daily") for org, id_ in REPEATED]


@pytest.mark.parametrize(
    ("tuning", "connections"),
    [({"chunk_size": 2}, 1), ({"chunk_size": 3, "page_rows": 1}, 1), ({"chunk_size": 2}, 2)],
    ids=["head", "row budget", "parallel bounds"],
)
def test_pages_lose_no_duty_whose_id_repeats_in_another_organisation(
    server_dsn: str, layouts: dict[str, str], tuning: dict[str, Any], connections: int
) -> None:
    with (
        cloned_database(server_dsn, layouts[PARTITIONED]) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
        psycopg.connect(dsn, autocommit=True) as helper,
    ):
        insert_duties(
            conn,
            _repeated(),
        )
        report = dispatch([conn, helper][:connections], RunRequest(now=NOW), runtime(**tuning))
        written = conn.execute(
            "SELECT DISTINCT organization_id, duty_id FROM duly_task ORDER BY 1, 2"
        ).fetchall()

    assert report.duties_read == len(REPEATED)
    assert [tuple(row) for row in written] == sorted(REPEATED)


def test_a_locked_duty_leaves_out_its_row_alone_not_its_namesake_in_another_organisation(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # Only org-a's d2 is locked past the lock timeout: org-b's d2 is owed
    # and dispatched, and the one set aside is org-a's.
    with _holding(server_dsn, layouts, _repeated()) as (conn, holder):
        _lock(holder, "org-a", "d2")
        conn.execute("SET lock_timeout = '200ms'")
        report = dispatch([conn], RunRequest(now=NOW), runtime())
        holder.rollback()
        written = conn.execute(
            "SELECT DISTINCT organization_id, duty_id FROM duly_task ORDER BY 1, 2"
        ).fetchall()

    assert [tuple(row) for row in written] == sorted(set(REPEATED) - {("org-a", "d2")})
    assert [(each.organization_id, each.duty_id) for each in report.set_aside] == [("org-a", "d2")]


def test_a_refused_duty_is_set_aside_alone_not_its_namesake_in_another_organisation(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # The server refuses org-a's d2 alone: org-b's d2 is owed and
    # dispatched, and only org-a's is faulted and kept on the fault account.
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        insert_duties(
            conn,
            _repeated(),
        )
        refuse_tasks(conn, "NEW.organization_id = 'org-a' AND NEW.duty_id = 'd2'")
        outcome = dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        written = conn.execute(
            "SELECT DISTINCT organization_id, duty_id FROM duly_task ORDER BY 1, 2"
        ).fetchall()
        account = conn.execute(
            "SELECT organization_id, duty_id FROM duly_dispatch_fault ORDER BY 1, 2"
        ).fetchall()

    assert [tuple(row) for row in written] == sorted(set(REPEATED) - {("org-a", "d2")})
    assert [(each.organization_id, each.duty_id) for each in outcome.report.faults] == [
        ("org-a", "d2")
    ]
    assert [tuple(row) for row in account] == [("org-a", "d2")]


def test_a_duty_the_planner_refuses_at_the_calendar_edge_is_set_aside_alone_not_its_namesake(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # org-a's d2 has a grace that reaches past 9999; org-b's d2 has none.
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        insert_duties(
            conn,
            [
                duty(id_, organization_id=org, due_anchor="period_end",
                     grace_days=1 if (org, id_) == ("org-a", "d2") else 0)
                for org, id_ in REPEATED
            ],
        )  # fmt: skip
        window = Window(date(9999, 10, 1), date(9999, 12, 31))
        report = dispatch(
            [conn], RunRequest(now=datetime(9999, 12, 1, tzinfo=UTC), window=window), runtime()
        )
        written = conn.execute(
            "SELECT DISTINCT organization_id, duty_id FROM duly_task ORDER BY 1, 2"
        ).fetchall()

    assert [tuple(row) for row in written] == sorted(set(REPEATED) - {("org-a", "d2")})
    assert [(each.organization_id, each.duty_id) for each in report.faults] == [("org-a", "d2")]


def _fault_account(conn: Conn) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT organization_id, duty_id FROM duly_dispatch_fault ORDER BY 1, 2"
    ).fetchall()
    return [(str(organization), str(duty_id)) for organization, duty_id in rows]


def test_a_refused_duty_whose_namesake_its_page_did_not_read_is_faulted_alone(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # Monthly, lead 7: from the 22nd, org-b's d2 owes nothing until the month
    # turns, and the scheduled run passes it over; org-a's is refused daily.
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        insert_duties(conn, [duty("d2", organization_id=org) for org in ("org-a", "org-b")])
        refuse_tasks(conn, "NEW.organization_id = 'org-a' AND NEW.duty_id = 'd2'")
        new_faults, accounts = [], []
        for day in (21, 22, 25, 26):
            at = datetime(2026, 8, day, 1, tzinfo=UTC)
            new_faults.append(dispatch_recorded([conn], RunRequest(now=at), runtime()).new_faults)
            accounts.append(_fault_account(conn))

    assert new_faults == [1, 0, 0, 0]
    assert accounts == [[("org-a", "d2")]] * 4


def test_a_namesake_set_aside_by_key_keeps_no_other_organisation_s_ended_fault(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with _holding(
        server_dsn,
        layouts,
        [duty("d2", organization_id=org, frequency="daily") for org in ("org-a", "org-b")],
    ) as (conn, holder):
        refuse_tasks(conn, "NEW.organization_id = 'org-b' AND NEW.duty_id = 'd2'")
        dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        conn.execute("ALTER TABLE duly_task DISABLE TRIGGER refuse_task")
        # Mended, while org-a's row of the id is locked and set aside by key.
        _lock(holder, "org-a", "d2")
        conn.execute("SET lock_timeout = '200ms'")
        dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=1)), runtime())
        holder.rollback()
        mended = _fault_account(conn)
        conn.execute("ALTER TABLE duly_task ENABLE TRIGGER refuse_task")
        broken_again = dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=2)), runtime())

    assert mended == []
    assert broken_again.new_faults == 1


def test_explain_names_the_organisations_that_hold_an_id_until_one_is_named(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # Answering for either duty of a repeated id would be a guess.
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        insert_duties(
            conn,
            [
                duty("d1", organization_id="org-a", frequency="monthly"),
                duty("d1", organization_id="org-b", frequency="weekly"),
            ],
        )
        unnamed = explain(conn, ["d1"], NOW)["d1"]
        named = explain(conn, ["d1"], NOW, organization_id="org-b")["d1"]

    assert (unnamed["found"], unnamed["organizations"]) == (True, ["org-a", "org-b"])
    assert exit_status.of_explained(unnamed)[0] == exit_status.ExitStatus.REFUSED
    assert "name one" in render_explanation(unnamed, NOW.isoformat())
    assert (named["organization_id"], named["frequency"]) == ("org-b", "weekly")


def test_a_fault_is_kept_on_account_for_its_own_organisation_not_its_namesake(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # A healthy namesake kept on the fault account would never be new when it
    # breaks for real: its alarm would stay silent.
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        insert_duties(
            conn,
            [
                duty("d1", organization_id="org-a", timezone="Mars/Olympus"),
                duty("d1", organization_id="org-b"),
                duty("d2", organization_id="org-a", form="recurrin"),
                duty("d2", organization_id="org-b"),
            ],
        )
        outcome = dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        account = conn.execute(
            "SELECT organization_id, duty_id FROM duly_dispatch_fault ORDER BY 1, 2"
        ).fetchall()

    assert outcome.new_faults == 2
    assert [tuple(row) for row in account] == [("org-a", "d1"), ("org-a", "d2")]


@pytest.mark.parametrize("layout", [PLAIN, PARTITIONED])
def test_a_duty_moved_to_another_organisation_keeps_its_account(
    server_dsn: str, layouts: dict[str, str], layout: str
) -> None:
    # Partitioned by organisation, the move deletes the row from one partition
    # and inserts it in another: the insert is no new duty (migration 0019).
    with _connect(server_dsn, layouts, layout) as conn:
        insert_duties(conn, [duty("d1", organization_id="org-1", frequency="daily")])
        partition = "SELECT tableoid::regclass::text FROM duly_duty WHERE id = %s"
        before = conn.execute(partition, ("d1",)).fetchone()
        other = "org-2"
        for candidate in (f"org-{n}" for n in range(2, 40)):
            insert_duties(conn, [duty("probe", organization_id=candidate)])
            probed = conn.execute(partition, ("probe",)).fetchone()
            conn.execute("DELETE FROM duly_duty WHERE id = 'probe'")
            if layout == PLAIN or probed != before:
                other = candidate
                break
        conn.execute(
            "UPDATE duly_duty SET dispatch_through = '2026-11-20',"
            " dispatch_paused_on = '2026-11-21', dispatch_changed_on = '2026-11-23',"
            " dispatch_owed_between = '{(2026-11-23,)}', dispatch_version = 3 WHERE id = 'd1'"
        )
        conn.execute("UPDATE duly_duty SET organization_id = %s WHERE id = 'd1'", (other,))
        after = conn.execute(partition, ("d1",)).fetchone()
        account = conn.execute(
            "SELECT organization_id, dispatch_through, dispatch_paused_on, dispatch_changed_on,"
            " dispatch_owed_between::text, dispatch_version FROM duly_duty WHERE id = 'd1'"
        ).fetchone()

    assert (after != before) == (layout == PARTITIONED)
    assert account == (
        other,
        date(2026, 11, 20),
        date(2026, 11, 21),
        date(9999, 12, 31),  # a change no scheduled clock placed (no run in the ledger)
        "{[2026-11-24,)}",
        4,
    )


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry run"])
def test_namesakes_that_both_owe_are_each_counted_owing(
    server_dsn: str, layouts: dict[str, str], dry_run: bool
) -> None:
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        insert_duties(
            conn,
            [duty("d1", organization_id=org, frequency="daily") for org in ("org-a", "org-b")],
        )
        report = dispatch([conn], RunRequest(now=NOW, dry_run=dry_run), runtime())

    # Before: (1, 1), the two counted as one owing id and one with nothing due.
    assert (report.skipped.get("nothing_due", 0), report.duties_owing) == (0, 2)


@pytest.mark.parametrize(
    ("namesake", "organization_id"),
    [("paused", None), ("active", "org-b")],
    ids=["not dispatchable", "outside the run's organisation"],
)
def test_a_locked_namesake_the_run_does_not_read_is_not_set_aside(
    server_dsn: str,
    layouts: dict[str, str],
    namesake: str,
    organization_id: str | None,
) -> None:
    # org-b's d1 and org-a's d2 are locked; the run reads org-b's d1, not org-a's d2.
    with _holding(
        server_dsn,
        layouts,
        [
            duty("d1", organization_id="org-b", frequency="daily"),
            duty("d2", organization_id="org-b", frequency="daily"),
            duty("d2", organization_id="org-a", frequency="daily", status=namesake),
        ],
    ) as (conn, holder):
        _lock(holder, "org-b", "d1")
        _lock(holder, "org-a", "d2")
        conn.execute("SET lock_timeout = '200ms'")
        request = RunRequest(now=NOW, scope=Scope(organization_id=organization_id))
        report = dispatch([conn], request, runtime())
        holder.rollback()

    # Before: org-a's d2 set aside too, and counted read twice. (org-b's d1 is
    # set aside by its key: before the test above, by its id alone.)
    assert [(each.organization_id, each.duty_id) for each in report.set_aside] == [("org-b", "d1")]
    assert report.duties_read == (3 if organization_id is None else 2)


def _task_keys_of(conn: Conn, organization_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT period_key FROM duly_task WHERE organization_id = %s ORDER BY 1",
        (organization_id,),
    ).fetchall()
    return [str(key) for (key,) in rows]


def test_a_namesake_set_aside_under_new_rules_is_owed_a_fresh_judgement_alone(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with _holding(
        server_dsn, layouts, [duty("d1", organization_id=org) for org in ("org-a", "org-b")]
    ) as (conn, holder):
        dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        conn.execute("UPDATE duly_dispatch_run SET rules = 'tzdata 2020a; holidays 0; owed 0'")
        # The first run under new rules sets org-a's d1 aside and judges org-b's.
        _lock(holder, "org-a", "d1")
        conn.execute("SET lock_timeout = '200ms'")
        new_rules = dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=1)), runtime())
        holder.rollback()
        # Someone deletes org-b's current task: no run under the same rules re-creates it.
        conn.execute("DELETE FROM duly_task WHERE organization_id = 'org-b'")
        following = dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=2)), runtime())
        keys = (_task_keys_of(conn, "org-a"), _task_keys_of(conn, "org-b"))

    assert [(each.organization_id, each.duty_id) for each in new_rules.report.set_aside] == [
        ("org-a", "d1")
    ]
    # Before: org-b's judged afresh again, its deleted task re-created, 2 read.
    assert keys == (["2026-08"], [])
    assert following.report.duties_read == 1


def test_a_locked_row_no_namesake_shares_is_set_aside_by_key_and_owes_no_namesake_s_judgement(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # Monthly, lead 7: 2026-09 becomes owed on 08-25.
    with _holding(
        server_dsn, layouts, [duty("d1", organization_id=org) for org in ("org-a", "org-b")]
    ) as (conn, holder):
        dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        conn.execute("UPDATE duly_dispatch_run SET rules = 'tzdata 2020a; holidays 0; owed 0'")
        conn.execute("SET lock_timeout = '200ms'")
        # 08-22, new rules: org-b's row locked, set aside owing the judgement;
        # org-a's judged afresh.
        _lock(holder, "org-b", "d1")
        dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=1)), runtime())
        holder.rollback()
        conn.execute("UPDATE duly_duty SET status = 'paused' WHERE organization_id = 'org-b'")
        conn.execute("DELETE FROM duly_task WHERE organization_id = 'org-a'")
        # 08-25, the same rules: org-a's row, the only one of the id the run
        # reads, is locked.
        _lock(holder, "org-a", "d1")
        locked = dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=4)), runtime())
        holder.rollback()
        dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=5)), runtime())
        keys = _task_keys_of(conn, "org-a")

    # Before: (None, "d1"), the ledger's row matching org-b's judgement by the
    # id alone, and org-a's deleted 2026-08 created again.
    assert [(each.organization_id, each.duty_id) for each in locked.report.set_aside] == [
        ("org-a", "d1")
    ]
    assert keys == ["2026-09"]


def test_a_locked_row_no_namesake_shares_keeps_no_other_organisation_s_ended_fault(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with _holding(
        server_dsn,
        layouts,
        [
            duty("d1", organization_id="org-a", frequency="daily", timezone="Mars/Olympus"),
            duty("d1", organization_id="org-b", frequency="daily"),
        ],
    ) as (conn, holder):
        dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        # org-a's paused: judged without a fault. org-b's, the only row of the
        # id the run reads, is locked.
        conn.execute("UPDATE duly_duty SET status = 'paused' WHERE organization_id = 'org-a'")
        _lock(holder, "org-b", "d1")
        conn.execute("SET lock_timeout = '200ms'")
        dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=1)), runtime())
        holder.rollback()
        paused = _fault_account(conn)
        conn.execute("UPDATE duly_duty SET status = 'active' WHERE organization_id = 'org-a'")
        broken_again = dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=2)), runtime())

    # Before: org-a's row kept ([("org-a", "d1")]), its fault never new again.
    assert paused == []
    assert broken_again.new_faults == 1


def test_namesakes_set_aside_for_two_reasons_are_both_kept_in_the_ledger(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with _holding(server_dsn, layouts, _repeated()) as (conn, holder):
        conn.execute(
            "CREATE FUNCTION slow_task() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.organization_id = 'org-b' AND NEW.duty_id = 'd2' THEN"
            " PERFORM pg_sleep(0.6); END IF; RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER slow_task BEFORE INSERT ON duly_task"
            " FOR EACH ROW EXECUTE FUNCTION slow_task()"
        )
        _lock(holder, "org-a", "d2")
        conn.execute("SET lock_timeout = '200ms'")
        conn.execute("SET statement_timeout = '300ms'")
        outcome = dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        holder.rollback()
        kept = conn.execute(
            "SELECT organization_id, duty_id, reason FROM duly_dispatch_set_aside ORDER BY 1"
        ).fetchall()

    listed = [
        (each.organization_id, each.duty_id, str(each.reason)) for each in outcome.report.set_aside
    ]
    assert sorted(listed) == [("org-a", "d2", "locked"), ("org-b", "d2", "timed_out")]
    # Before: one row, ('d2', 'locked'): the set-aside ledger was keyed by id.
    assert [tuple(row) for row in kept] == sorted(listed)


def test_a_namesake_edited_during_a_backfill_is_set_aside_alone_and_kept_by_its_key(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    # org-a's d2 moves to a zone no duty had when the backfill planned, just
    # before its first page: it is set aside by its key; org-b's d2 is
    # dispatched.
    with _holding(server_dsn, layouts, _repeated()) as (conn, holder):
        edits = [
            "UPDATE duly_duty SET timezone = 'Asia/Tokyo'"
            " WHERE (organization_id, id) = ('org-a', 'd2')"
        ]

        def page(*args: Any, **kwargs: Any) -> Any:
            while edits:
                holder.execute(edits.pop())
                holder.commit()
            return dispatch_page(*args, **kwargs)

        tuned = replace(runtime(), dispatch_page=page)
        window = Window(date(2026, 8, 1), date(2026, 8, 3))
        outcome = dispatch_recorded([conn], RunRequest(now=NOW, window=window), tuned)
        written = conn.execute(
            "SELECT DISTINCT organization_id, duty_id FROM duly_task ORDER BY 1, 2"
        ).fetchall()
        kept = conn.execute(
            "SELECT organization_id, duty_id, reason FROM duly_dispatch_set_aside"
        ).fetchall()

    assert [tuple(row) for row in written] == sorted(set(REPEATED) - {("org-a", "d2")})
    assert [tuple(row) for row in kept] == [("org-a", "d2", "edited")]
    assert outcome.report.duties_read == len(REPEATED)


def _refused_afresh_rows(conn: Conn) -> list[tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT organization_id, duty_id, reason, afresh FROM duly_dispatch_set_aside ORDER BY 1, 2"
    ).fetchall()
    return [tuple(row) for row in rows]


def test_a_namesake_refused_under_new_rules_is_owed_a_fresh_judgement_alone(
    server_dsn: str, layouts: dict[str, str]
) -> None:
    with _connect(server_dsn, layouts, PARTITIONED) as conn:
        insert_duties(conn, [duty("d1", organization_id=org) for org in ("org-a", "org-b")])
        dispatch_recorded([conn], RunRequest(now=NOW), runtime())
        conn.execute("DELETE FROM duly_task WHERE organization_id = 'org-a'")
        conn.execute("UPDATE duly_dispatch_run SET rules = 'tzdata 2020a; holidays 0; owed 0'")
        refuse_tasks(conn, "NEW.organization_id = 'org-a' AND NEW.duty_id = 'd1'")
        # The first run under new rules: org-a's d1 refused, org-b's judged afresh.
        new_rules = dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=1)), runtime())
        kept = _refused_afresh_rows(conn)
        conn.execute("DROP TRIGGER refuse_task ON duly_task")
        conn.execute("DELETE FROM duly_task WHERE organization_id = 'org-b'")
        following = dispatch_recorded([conn], RunRequest(now=NOW + timedelta(days=2)), runtime())
        keys = (_task_keys_of(conn, "org-a"), _task_keys_of(conn, "org-b"))

    assert [(each.organization_id, each.duty_id) for each in new_rules.report.faults] == [
        ("org-a", "d1")
    ]
    assert new_rules.report.set_aside == ()
    assert kept == [("org-a", "d1", "refused", True)]
    assert keys == (["2026-08"], [])
    assert following.report.duties_read == 1
    assert following.new_faults == 0

"""What the server receives is the statement files' own text, with only their slots filled."""

from __future__ import annotations

import inspect
import re
from datetime import timedelta
from importlib import resources
from typing import Any

import psycopg
import pytest
from psycopg import sql

from dispatch_fn.db import database, migrate, store
from dispatch_fn.db.layout import PARTITIONED, PLAIN, apply_layout
from dispatch_fn.db.sql import statement, statement_text
from dispatch_fn.planning import RunRequest, Scope, plan
from dispatch_fn.run import dispatch, dispatch_recorded
from support import NOW, duty, insert_duties, session_layout

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
    dispatch([conn], RunRequest(now=NOW))
    row = conn.execute("SELECT query FROM seen").fetchone()
    assert row is not None
    return str(row[0])


def test_the_page_statement_the_server_receives_is_one_files_text(
    conn: psycopg.Connection[Any],
) -> None:
    # psycopg sends each named placeholder as a numbered one.
    assert _placeholders_blank(_received(conn)) == _placeholders_blank(statement_text("page_write"))


def test_a_re_run_at_a_clock_the_ledger_holds_sends_the_probing_page_statement(
    conn: psycopg.Connection[Any],
) -> None:
    # The ledger's latest completed clock is this run's: its first page
    # probes (page_plan.probes_from_the_start), before any page has said so.
    _received(conn)
    dispatch_recorded([conn], RunRequest(now=NOW))
    # The accounts forgotten, as on the first run after migration 0012 over a
    # table of tasks: the re-run owes rows that exist (a kept account owes none).
    conn.execute(
        "UPDATE duly_duty SET dispatch_through = NULL, dispatch_next = '0001-01-01',"
        " dispatch_next_at = '0001-01-01 00:00:00+00'"
    )
    conn.execute("TRUNCATE seen")
    dispatch_recorded([conn], RunRequest(now=NOW))
    seen = [str(row[0]) for row in conn.execute("SELECT query FROM seen")]
    assert [_placeholders_blank(each) for each in seen] == [
        _placeholders_blank(statement_text("page_write_rerun"))
    ]


def _names() -> list[str]:
    """Every statement file but those only included in others (page_owed.sql, a fragment)."""
    folder = resources.files("dispatch_fn.db").joinpath("statements")
    files = {e.name.removesuffix(".sql"): e.read_text("utf-8") for e in folder.iterdir()
             if e.name.endswith(".sql")}  # fmt: skip
    included = {m for text in files.values() for m in re.findall(r"^-- duly:include (\w+)$",
                                                                  text, re.MULTILINE)}  # fmt: skip
    return sorted(set(files) - included)


# The slots that remain name what cannot be a bound parameter: the roles and
# the database a grant names, the migration ledger's table, a role's password
# verifier (SQL has no placeholder for an identifier or in ALTER ROLE).
_IDENTIFIER_SLOTS = {"ledger", "login", "role", "database", "verifier"}


def _slots(text: str) -> set[str]:
    return set(re.findall(r"(?<!%\()\{(\w+)\}", text))


def test_no_statement_file_is_a_fragment_and_only_identifiers_are_slots() -> None:
    for name in _names():
        text = statement_text(name)
        assert text.startswith("-- "), name  # says what it is, first
        body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
        assert not body.lstrip().startswith(","), name
        assert _slots(text) <= _IDENTIFIER_SLOTS, (name, _slots(text))
    scoped = [name for name in _names() if "duly_in_scope" in statement_text(name)]
    assert all(not _slots(statement_text(name)) for name in scoped)


def _parseable(text: str) -> str:
    # Each named placeholder becomes one numbered one, as psycopg sends it;
    # a slot becomes an identifier (the ledger's own) or, for a verifier, a string.
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    def fill(match: re.Match[str]) -> str:
        filled = {"verifier": "'probe'", "ledger": f'"{migrate.LEDGER}"'}
        return filled.get(match.group(1), f'"duly_probe_{match.group(1)}"')

    text = re.sub(r"%\((\w+)\)[sb]", number, text)
    return re.sub(r"(?<!%\()\{(\w+)\}", fill, text)


_UTILITY = re.compile(r"^\s*(CREATE|ALTER|GRANT|REVOKE|SET)\b", re.IGNORECASE)
# EXPLAIN cannot be prepared either; the query it explains can.
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s*(\([^)]*\))?\s*", re.IGNORECASE)


def test_every_statement_file_parses_in_postgresql_on_its_own(
    conn: psycopg.Connection[Any],
) -> None:
    # PREPARE parses and analyses a query against the schema (tables, columns,
    # functions, the parameters' types) without running it. A utility
    # statement cannot be prepared: PL/pgSQL parses it as a function body.
    for name in _names():
        body = "\n".join(
            line for line in statement_text(name).splitlines() if not line.startswith("--")
        )
        text = _EXPLAIN.sub("", _parseable(body).strip().removesuffix(";"))
        with conn.transaction(force_rollback=True):
            if _UTILITY.match(text):
                conn.execute(
                    sql.SQL(
                        "CREATE FUNCTION pg_temp.probe() RETURNS void LANGUAGE plpgsql AS {} "
                    ).format(sql.Literal(f"BEGIN {text}; END"))
                )
            else:
                conn.execute(sql.SQL("PREPARE probe AS {}").format(sql.SQL(text)))
                conn.execute("DEALLOCATE probe")


def test_the_page_statements_spell_the_owed_rule_once() -> None:
    def between(text: str, start: str, end: str) -> str:
        first = text.index(start)
        return text[first : text.index(end, first)]

    # One file holds the rule; each page statement includes it, unexpanded on disk.
    statements = resources.files("dispatch_fn.db").joinpath("statements")
    for name in ("page_write", "page_write_rerun", "page_dry_run"):
        raw = statements.joinpath(f"{name}.sql").read_text("utf-8")
        assert raw.count("\n-- duly:include page_owed\n") == 1, name
        assert "WITH cadence AS (" not in raw, name
    owed = statement_text("page_owed")
    rule = owed[owed.index("WITH cadence AS (") :].rstrip("\n")
    for name in ("page_write", "page_write_rerun", "page_dry_run"):
        assert rule in statement_text(name), name
    # The probing variant is page_write.sql but for its probe, word for word.
    write, rerun = statement_text("page_write"), statement_text("page_write_rerun")
    probe = between(rerun, "\n    -- The probe:", "\n    ORDER BY duty_id")
    assert "AND NOT EXISTS (" in probe
    whole = "WITH cadence AS ("
    unprobed = rerun.replace(probe, "")
    assert unprobed[unprobed.index(whole) :] == write[write.index(whole) :]
    head = "head AS NOT MATERIALIZED ("
    taken = statement_text("page_taken_ids")
    assert between(taken, head, "\n)\nSELECT id FROM page") == between(
        write, head, "\n),\naccepted_rule AS ("
    )


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
    report = dispatch([conn], RunRequest(now=NOW, dry_run=True))
    assert report.tasks_created == 1
    assert conn.execute("SHOW enable_seqscan").fetchone() == ("on",)
    assert statement_text("page_dry_run_plan").strip().endswith("SET LOCAL enable_seqscan = off")


def test_groups_with_equal_schedules_send_their_periods_once() -> None:
    # Two zones on the same local date at the clock, in two lead buckets of
    # one of them, plan equal monthly schedules; a zone still on the day
    # before (Los Angeles at 01:00 UTC) does not.
    zones = ("Europe/Paris", "Europe/Berlin", "America/Los_Angeles")
    ready = [
        (
            store.Group(
                frequency="monthly", timezone=zone, lead_bucket=bucket, duties=1, max_lead=0
            ),
            plan.schedule_for("monthly", zone, NOW),
        )
        for zone, bucket in ((zones[0], 0), (zones[0], 3), (zones[1], 0), (zones[2], 0))
    ]
    first = ready[0][1]
    assert ready[1][1] == ready[2][1] == first != ready[3][1]

    params = store.page_statement(Scope(), ready, store.Rules(), dry_run=False).params

    assert params["c_schedule"] == [0, 0, 0, 1]
    # Each schedule's periods, then the period after them (plan.Schedule.after).
    assert len(params["p_key"]) == len(first.periods) + len(ready[3][1].periods) + 2


def _many_duties(conn: psycopg.Connection[Any], count: int) -> None:
    # Enough rows, a third of them paused, that the planner's choice is its own;
    # forty organisations, so that every partition holds some (DULY_LAYOUT=partitioned).
    conn.execute(
        sql.SQL(
            "INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id, source,"
            " frequency) SELECT 'd' || lpad(n::text, 6, '0'), 'org-' || (n % 40), 'Duty',"
            " 'recurring', CASE WHEN n % 3 = 0 THEN 'paused' ELSE 'active' END, 'owner-1',"
            " 'catalog', 'monthly' FROM generate_series(1, {}) n"
        ).format(sql.Literal(count))
    )
    conn.execute("ANALYZE duly_duty")


def _monthly_page(scope: Scope) -> dict[str, Any]:
    # The parameters of one page of _many_duties' monthly duties, d011001 to
    # d012000: past a continued run's resume point (d010000), as its pages
    # are, since a page before it is empty and the planner may prove it so.
    group = store.Group(
        frequency="monthly", timezone="UTC", lead_bucket=plan.lead_bucket(7), duties=1, max_lead=7
    )
    ready = [(group, plan.schedule_for("monthly", "UTC", NOW))]
    page = store.page_statement(scope, ready, store.Rules(), dry_run=False)
    return page.bind("d011000", "d012000", 500, None, ())


def _plan(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> str:
    # Unprepared, as the data layer runs it: planned with the values bound.
    explain = sql.SQL("EXPLAIN ") + statement(name)
    return "\n".join(str(row[0]) for row in conn.execute(explain, params, prepare=False))


# A scan of the page's duly_duty d: of the table, or on the partitioned layout
# (DULY_LAYOUT=partitioned) of one partition, aliased d or d_1, d_2, ...
_DUTY_SCAN = re.compile(r" on duly_duty(_p[0-9]+)? [dk](_[0-9]+)?$")
# The partial index the pages walk, or its partition's (duly_duty_next_at_p3).
_WALKED = re.compile(r" using duly_duty_next_at(_p[0-9]+)? on ")


def _scans_of_duties(plan_text: str) -> list[tuple[str, str, str]]:
    # Each scan of the page's duly_duty d: (scan line, its Index Cond, its Filter).
    # What the advance of last_dispatched_period reads (the Update node and
    # everything under it) is another scan of the table, not the page's.
    lines = plan_text.splitlines()
    found = []
    update_at: int | None = None
    for at, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if update_at is not None and indent > update_at:
            continue
        update_at = None
        if "Update on duly_duty" in line:
            update_at = indent
            continue
        if _DUTY_SCAN.search(line.rstrip().split("  (cost")[0]):
            detail = []
            for each in lines[at + 1 :]:
                if "->" in each or not each.strip().startswith(("Index Cond:", "Filter:")):
                    break
                detail.append(each.strip())
            cond = next((d for d in detail if d.startswith("Index Cond:")), "")
            kept = next((d for d in detail if d.startswith("Filter:")), "")
            # A look-up of one duty by its id (the dry run's) is not the page's walk.
            if not re.search(r"\bid = |= id\b", f"{cond} {kept}"):
                found.append((line.strip(), cond, kept))
    return found


_PAGE_READERS = (
    "page_write",
    "page_dry_run",
    "page_taken_ids",
    "page_duty_rows",
    "any_dispatchable",
)
# A scheduled run's scope: it reads the duties whose next owed day has begun.
_CONTINUED = Scope(organization_id="org-1", resume_after="d010000", owed_at=NOW)


@pytest.mark.parametrize("scope", [Scope(owed_at=NOW), _CONTINUED], ids=["unscoped", "continued"])
def test_the_page_statements_walk_the_partial_index_with_their_rules_inlined(
    conn: psycopg.Connection[Any], scope: Scope
) -> None:
    # duly_dispatchable, duly_in_scope and duly_due_rule_in_range are inlined
    # before planning: the partial index's predicate is proved from the
    # first, and the bounds and the resume point left of the second, once
    # their null tests fold away, are the index's own conditions.
    _many_duties(conn, 20_000)
    # As on a day after the first run: most duties next owe on a later day.
    conn.execute("UPDATE duly_duty SET dispatch_next_at = %s WHERE right(id, 1) <> '0'",
                 (NOW + timedelta(days=10),))  # fmt: skip
    # And vacuumed since, as autovacuum leaves it (migration 0014's settings).
    conn.execute("VACUUM (ANALYZE) duly_duty")
    params = _monthly_page(scope)
    bounds = "(id > 'd011000'::text) AND (id <= 'd012000'::text)"
    resumed = " AND (id > 'd010000'::text)" if scope.resume_after else ""
    # The instant the next owed day begins is the index's second column: the
    # index tests it.
    owed_at = conn.execute("SELECT %s::timestamptz::text", (NOW,)).fetchone()
    assert owed_at is not None
    resumed += f" AND (dispatch_next_at <= '{owed_at[0]}'::timestamp with time zone)"
    kept = "Filter: (organization_id = 'org-1'::text)" if scope.organization_id else ""
    # Partitioned by organisation, an unscoped page reads every partition's
    # index; a page of one organisation reads its partition's alone.
    scanned = 8 if session_layout() == "partitioned" and not scope.organization_id else 1
    for name in _PAGE_READERS:
        text = _plan(conn, name, params)
        scans = _scans_of_duties(text)
        assert [(cond, kept_filter) for _, cond, kept_filter in scans] == [
            (f"Index Cond: ({bounds}{resumed})", kept)
        ] * scanned, (name, text)
        assert all(_WALKED.search(line) for line, _, _ in scans), (name, text)
        assert "duly_dispatchable(" not in text, name
        assert "duly_in_scope" not in text, name
    text = _plan(conn, "page_bounds", {**store.scope_params(scope), "skip": 999})
    scans = _scans_of_duties(text)
    assert scans, text
    for line, cond, kept_filter in scans:
        assert _WALKED.search(line), text
        assert kept_filter == kept, text
        if scope.resume_after:
            assert "(id > 'd010000'::text)" in cond, text


def _organisation_led_indexes(conn: psycopg.Connection[Any]) -> set[str]:
    # Indexes of duly_duty or its partitions whose first column is the organisation.
    rows = conn.execute(
        "SELECT i.indexrelid::regclass::text FROM pg_index i"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
        " WHERE i.indrelid::regclass::text LIKE 'duly_duty%' AND a.attname = 'organization_id'"
    ).fetchall()
    return {str(row[0]) for row in rows}


# A scan of duly_duty or a partition of it, naming its index where it has one:
# "Index [Only ]Scan [Backward ]using IDX on duly_duty…", "Bitmap Index Scan on
# IDX" (every index of the table is named duly_duty…), "Seq Scan on duly_duty…".
_DUTY_READ = re.compile(
    r"(?:Index (?:Only )?Scan (?:Backward )?using (?P<index>\S+) on duly_duty"
    r"|Bitmap Index Scan on (?P<bitmap>duly_duty\S*)"
    r"|Seq Scan on duly_duty)"
)


def _unbounded_duty_scans(plan_text: str, organisation_led: set[str]) -> list[str]:
    # Every read of duly_duty (or a partition of it) that walks more than its
    # key: a sequential scan, an index scan without a condition, or one that
    # skips the leading organisation of its index (every entry is then read).
    # A bitmap heap scan reads what its bitmap index scans found; those are
    # checked instead.
    lines = plan_text.splitlines()
    unbounded = []
    for at, line in enumerate(lines):
        scan = _DUTY_READ.search(line)
        if scan is None:
            continue
        index = scan["index"] or scan["bitmap"]
        detail = []
        for each in lines[at + 1 :]:
            if "->" in each:
                break
            detail.append(each.strip())
        cond = next((d for d in detail if d.startswith("Index Cond:")), "")
        if (
            index is None
            or not cond
            or (index in organisation_led and "organization_id" not in cond)
        ):
            unbounded.append(f"{line.strip()} {cond}")
    return unbounded


def _advance_lookups(plan_text: str) -> list[str]:
    # The index conditions that find one duty by its organisation and id: as
    # equalities (the dry run's look), or as the one-element arrays the
    # writing statements' UPDATE compares so that it cannot be hashed.
    equal = (r"\(organization_id = \w+\.organization_id\)", r"\(id = \w+\.duty_id\)")
    arrays = (r"organization_id = ANY \(ARRAY\[", r"\(id = ANY \(ARRAY\[")
    return [
        line.strip()
        for line in plan_text.splitlines()
        if "Index Cond:" in line
        and any(all(re.search(each, line) for each in form) for form in (equal, arrays))
    ]


@pytest.mark.parametrize("name", ["page_write", "page_write_rerun", "page_dry_run"])
def test_the_advance_finds_each_duty_by_its_organisation_and_id(
    conn: psycopg.Connection[Any], name: str
) -> None:
    # The tasks carry the organisation, and on a layout partitioned by it the
    # only index on id is (organization_id, id): joined on id alone, the
    # advance reads every duty partition's index whole for each duty, or every
    # partition once per page. On the plain layout id is the primary key, so
    # the statements are held to the partitioned layout's, whatever the
    # session's (DULY_LAYOUT).
    if session_layout() == PLAIN:
        apply_layout(conn, PARTITIONED)
    _many_duties(conn, 20_000)
    params = _monthly_page(Scope())
    with conn.transaction(force_rollback=True):
        if name == "page_dry_run":
            # As store.dispatch_page plans a dry page: in its own transaction.
            conn.execute(statement("page_dry_run_plan"))
        text = _plan(conn, name, params)
    assert _advance_lookups(text), text
    assert _unbounded_duty_scans(text, _organisation_led_indexes(conn)) == [], text

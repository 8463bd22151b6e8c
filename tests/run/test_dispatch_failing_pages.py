"""A page that one duty's content makes the server refuse still dispatches every other duty."""

from __future__ import annotations

import secrets
from typing import Any

import psycopg
import pytest

from dispatch_fn import settings
from dispatch_fn.planning import RunRequest
from dispatch_fn.run import RunFailedError, dispatch
from runtimes import runtime
from support import NOW, duty, insert_duties, task_count

type Conn = psycopg.Connection[Any]


def _incompressible(length: int) -> str:
    # Random text: PostgreSQL compresses a long index entry before judging its
    # size, so a repeated character would fit.
    return secrets.token_hex(length)[:length]


def _oversized(duty_id: str) -> dict[str, Any]:
    # Fits in duly_duty (each column is indexed alone at most with the id), but
    # the task's unique key (organization_id, duty_id, owner_id, period_key)
    # exceeds the largest entry a btree page can hold (about 2,700 bytes).
    return duty(duty_id, organization_id=_incompressible(1400), owner_id=_incompressible(1400))


@pytest.mark.parametrize("chunk_size", [10, settings.DEFAULT_CHUNK_SIZE])
def test_one_oversized_duty_is_a_fault_and_every_other_duty_is_dispatched(
    conn: Conn, chunk_size: int
) -> None:
    duties = [duty(f"d{n:02}") for n in range(30)]
    duties[17] = _oversized("d17")
    insert_duties(conn, duties)

    report = dispatch([conn], RunRequest(now=NOW), runtime(chunk_size=chunk_size))

    assert task_count(conn) == 29
    assert conn.execute("SELECT count(*) FROM duly_task WHERE duty_id = 'd17'").fetchone() == (0,)
    assert [(f.duty_id, f.reason) for f in report.faults] == [("d17", "invalid_cadence")]
    assert "ProgramLimitExceeded" in report.faults[0].detail
    assert report.fault_counts["invalid_cadence"] == 1
    assert (report.tasks_created, report.degraded, report.complete) == (29, True, True)
    assert report.last_duty_id == "d29"

    again = dispatch([conn], RunRequest(now=NOW), runtime(chunk_size=chunk_size))
    # The others' accounts are kept; the broken duty's is not, so it faults again.
    assert (again.tasks_created, again.tasks_existing, again.duties_owing) == (0, 0, 0)
    assert [f.duty_id for f in again.faults] == ["d17"]


def test_a_duty_that_breaks_a_constraint_on_its_task_is_a_fault_and_the_rest_is_dispatched(
    conn: Conn, helpers: list[Conn]
) -> None:
    insert_duties(conn, [duty(f"d{n:02}") for n in range(40)])
    # A rule added to duly_task later (here: a CHECK) that one duty's row breaks.
    conn.execute("ALTER TABLE duly_task ADD CONSTRAINT no_d05 CHECK (subject <> 'Duty d05')")

    report = dispatch([conn, *helpers], RunRequest(now=NOW), runtime(chunk_size=16))

    assert task_count(conn) == 39
    assert [(f.duty_id, f.reason) for f in report.faults] == [("d05", "invalid_cadence")]
    assert "CheckViolation (SQLSTATE 23514)" in report.faults[0].detail
    assert (report.tasks_created, report.duties_read, report.complete) == (39, 40, True)


def test_a_duty_whose_task_breaks_another_foreign_key_is_a_fault_and_the_rest_is_dispatched(
    conn: Conn,
) -> None:
    # A foreign key added to duly_task later (here: to a table of owners) that
    # one duty's owner breaks: the row's own error, not a key moved under the
    # statement (which is tried again), so the page is taken apart.
    insert_duties(conn, [duty(f"d{n:02}", owner_id=f"owner-{n:02}") for n in range(10)])
    conn.execute("CREATE TABLE owner (id text PRIMARY KEY)")
    conn.execute("INSERT INTO owner SELECT owner_id FROM duly_duty WHERE id <> 'd05'")
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT task_owner FOREIGN KEY (owner_id) REFERENCES owner"
    )

    report = dispatch([conn], RunRequest(now=NOW), runtime())

    assert [(f.duty_id, f.reason) for f in report.faults] == [("d05", "invalid_cadence")]
    assert "ForeignKeyViolation (SQLSTATE 23503)" in report.faults[0].detail
    assert (report.tasks_created, report.complete, report.retries) == (9, True, 0)


def test_an_error_every_row_causes_fails_the_run_instead_of_taking_the_page_apart(
    conn: Conn,
) -> None:
    insert_duties(conn, [duty(f"d{n:03}") for n in range(200)])
    conn.execute("ALTER TABLE duly_task ADD CONSTRAINT nothing_fits CHECK (false)")

    with pytest.raises(RunFailedError, match="CheckViolation") as failed:
        dispatch([conn], RunRequest(now=NOW), runtime(chunk_size=200))

    assert task_count(conn) == 0
    assert failed.value.report["complete"] is False


def test_every_page_that_fails_is_named_in_the_runs_error(conn: Conn, helpers: list[Conn]) -> None:
    insert_duties(conn, [duty(f"d{n:02}") for n in range(30)])
    conn.execute(
        """
        CREATE FUNCTION refuse_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'injected failure' USING ERRCODE = 'XX000';
        END $$
        """
    )
    conn.execute(
        "CREATE TRIGGER refuse_inserts BEFORE INSERT ON duly_task"
        " FOR EACH STATEMENT EXECUTE FUNCTION refuse_inserts()"
    )

    with pytest.raises(RunFailedError) as failed:
        dispatch([conn, *helpers], RunRequest(now=NOW), runtime(chunk_size=10))

    message = str(failed.value)
    # Three connections took the three ranges at once; each failure is named.
    assert "3 page(s) failed" in message
    for after, upto in ((None, "'d09'"), ("'d09'", "'d19'"), ("'d19'", "'d29'")):
        assert f"range after {after} up to {upto}: InternalError_: injected failure" in message


def test_a_dry_run_cannot_know_the_index_will_refuse_an_oversized_task_and_counts_it(
    conn: Conn,
) -> None:
    duties = [duty(f"d{n:02}") for n in range(30)]
    duties[17] = _oversized("d17")
    insert_duties(conn, duties)

    report = dispatch([conn], RunRequest(now=NOW, dry_run=True), runtime(chunk_size=10))

    assert (report.tasks_created, report.degraded, task_count(conn)) == (30, False, 0)


def test_a_run_needs_at_least_one_connection() -> None:
    with pytest.raises(ValueError, match="at least one connection"):
        dispatch([], RunRequest(now=NOW))

"""A page that the server aborts with a deadlock or serialization failure is tried again."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from dispatch_fn.planning import RunRequest
from dispatch_fn.run import RunFailedError, dispatch
from support import NOW, duty, insert_duties, task_count


def _fail_inserts(conn: psycopg.Connection[Any], sqlstate: str, times: int) -> None:
    # The server itself raises the error, with the real SQLSTATE, on the first
    # `times` statements that insert tasks; the counter survives the rollback
    # because it is bumped through a sequence, which is not transactional.
    conn.execute("CREATE SEQUENCE failures_left_tick")
    conn.execute(
        f"""
        CREATE FUNCTION fail_first_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('failures_left_tick') <= {times} THEN
                RAISE EXCEPTION 'injected failure' USING ERRCODE = '{sqlstate}';
            END IF;
            RETURN NULL;
        END $$
        """
    )
    conn.execute(
        "CREATE TRIGGER fail_first_inserts BEFORE INSERT ON duly_task"
        " FOR EACH STATEMENT EXECUTE FUNCTION fail_first_inserts()"
    )


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"], ids=["deadlock", "serialization"])
def test_a_page_aborted_by_a_transient_conflict_is_retried_and_the_run_succeeds(
    conn: psycopg.Connection[Any], sqlstate: str
) -> None:
    insert_duties(conn, [duty("d1"), duty("d2")])
    _fail_inserts(conn, sqlstate, times=2)
    report = dispatch([conn], RunRequest(now=NOW))
    assert (report.retries, report.tasks_created) == (2, 2)
    assert task_count(conn) == 2


def test_a_conflict_that_persists_fails_the_run_and_writes_nothing(
    conn: psycopg.Connection[Any],
) -> None:
    insert_duties(conn, [duty("d1")])
    _fail_inserts(conn, "40P01", times=100)
    with pytest.raises(RunFailedError, match="DeadlockDetected"):
        dispatch([conn], RunRequest(now=NOW))
    assert task_count(conn) == 0


def test_a_run_refuses_a_connection_that_would_make_it_one_long_transaction(db_url: str) -> None:
    with psycopg.connect(db_url) as manual, pytest.raises(ValueError, match="autocommit"):
        dispatch([manual], RunRequest(now=NOW))

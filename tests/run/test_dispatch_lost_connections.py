"""A page whose connection dies is done again on another one; the run goes on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from dispatch_fn.planning import RunRequest, plan_dispatch
from dispatch_fn.run import CONNECTION_ATTEMPTS, RunFailedError, dispatch
from runtimes import runtime
from support import NOW, duty, insert_duties, multiset, task_count, task_rows

FREQUENCIES = ("daily", "weekly", "monthly", "quarterly")

type Conn = psycopg.Connection[Any]


def _duties(count: int) -> list[dict[str, Any]]:
    return [
        duty(f"d{n:03}", frequency=FREQUENCIES[n % len(FREQUENCIES)], lead_days=n % 10)
        for n in range(count)
    ]


def _terminate_inserting_backends(conn: Conn, *, statements: tuple[int, ...]) -> None:
    # The server kills the backend that runs the n-th statement inserting
    # tasks, for each n given: the client sees its connection terminated
    # mid-page, as after a failover or an operator's pg_terminate_backend.
    # The counter is a sequence, so it survives the page's rollback.
    conn.execute("CREATE SEQUENCE inserts_tick")
    conn.execute(
        f"""
        CREATE FUNCTION terminate_some_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('inserts_tick') = ANY('{{{",".join(map(str, statements))}}}'::bigint[]) THEN
                PERFORM pg_terminate_backend(pg_backend_pid());
                PERFORM pg_sleep(5);
            END IF;
            RETURN NULL;
        END $$
        """
    )
    conn.execute(
        "CREATE TRIGGER terminate_some_inserts BEFORE INSERT ON duly_task"
        " FOR EACH STATEMENT EXECUTE FUNCTION terminate_some_inserts()"
    )


def _planned(duties: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return multiset(plan_dispatch(duties, NOW).drafts)


@pytest.fixture
def opened(db_url: str) -> Iterator[list[Conn]]:
    """Connections the run opened through ``reconnect``, closed after the test."""
    conns: list[Conn] = []
    yield conns
    for each in conns:
        each.close()


def test_a_run_that_loses_a_helper_goes_on_with_the_others_and_writes_every_row(
    conn: Conn, helpers: list[Conn], db_url: str
) -> None:
    duties = _duties(60)
    insert_duties(conn, duties)
    _terminate_inserting_backends(conn, statements=(3,))

    report = dispatch([conn, *helpers], RunRequest(now=NOW), runtime(chunk_size=7))

    assert sum(each.broken for each in (conn, *helpers)) == 1
    with psycopg.connect(db_url) as reader:
        assert multiset(task_rows(reader)) == _planned(duties)
        assert (report.tasks_created, report.complete, report.last_duty_id) == (
            task_count(reader),
            True,
            "d059",
        )


def test_a_page_whose_only_connection_dies_is_done_again_on_a_fresh_one(
    conn: Conn, db_url: str, opened: list[Conn]
) -> None:
    duties = _duties(60)
    insert_duties(conn, duties)
    _terminate_inserting_backends(conn, statements=(2, 5))
    only = psycopg.connect(db_url, autocommit=True)
    opened.append(only)

    def reconnect() -> Conn:
        fresh = psycopg.connect(db_url, autocommit=True)
        opened.append(fresh)
        return fresh

    report = dispatch([only], RunRequest(now=NOW), runtime(chunk_size=7, reconnect=reconnect))

    assert len(opened) == 3  # the first connection and one fresh one per death
    assert multiset(task_rows(conn)) == _planned(duties)
    assert (report.tasks_created, report.tasks_existing, report.complete) == (
        task_count(conn),
        0,
        True,
    )


def test_a_run_whose_every_connection_dies_fails_and_keeps_its_committed_pages(
    conn: Conn, db_url: str, opened: list[Conn]
) -> None:
    duties = _duties(60)
    insert_duties(conn, duties)
    _terminate_inserting_backends(conn, statements=tuple(range(3, 100)))
    only = psycopg.connect(db_url, autocommit=True)
    opened.append(only)

    def reconnect() -> Conn:
        fresh = psycopg.connect(db_url, autocommit=True)
        opened.append(fresh)
        return fresh

    with pytest.raises(RunFailedError, match="terminating connection") as failed:
        dispatch([only], RunRequest(now=NOW), runtime(chunk_size=7, reconnect=reconnect))

    written = task_count(conn)
    assert failed.value.report["tasks_created"] == written > 0
    assert failed.value.report["complete"] is False
    assert len(opened) <= 1 + CONNECTION_ATTEMPTS  # bounded, not a reconnect storm
    # Only whole pages: every duty has all of its rows or none of them.
    wanted = Counter(draft["duty_id"] for draft in plan_dispatch(duties, NOW).drafts)
    per_duty = conn.execute("SELECT duty_id, count(*) FROM duly_task GROUP BY duty_id").fetchall()
    assert all(count == wanted[duty_id] for duty_id, count in per_duty)
    conn.execute("DROP TRIGGER terminate_some_inserts ON duly_task")  # the server is back
    rerun = dispatch([conn], RunRequest(now=NOW), runtime(chunk_size=7))
    assert rerun.tasks_created == len(plan_dispatch(duties, NOW).drafts) - written


def test_a_run_that_cannot_reconnect_goes_on_with_the_connections_it_has(
    conn: Conn, helpers: list[Conn], db_url: str
) -> None:
    duties = _duties(60)
    insert_duties(conn, duties)
    _terminate_inserting_backends(conn, statements=(2,))
    tried = 0

    def reconnect() -> Conn:
        nonlocal tried
        tried += 1
        raise psycopg.OperationalError("connection refused: the server is at max_connections")

    report = dispatch(
        [conn, *helpers], RunRequest(now=NOW), runtime(chunk_size=7, reconnect=reconnect)
    )

    assert tried == 1
    with psycopg.connect(db_url) as reader:
        assert multiset(task_rows(reader)) == _planned(duties)
    assert report.complete

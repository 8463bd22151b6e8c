"""Duties whose rows another session holds locked are set aside; the rest is dispatched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from dispatch_fn.db import database
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.planning import RunRequest
from dispatch_fn.run import dispatch
from dispatch_fn.settings import Settings
from runtimes import runtime
from support import NOW, duty, insert_duties, task_count

LOCKED = ("d03", "d11", "d12")

type Conn = psycopg.Connection[Any]


@pytest.fixture
def dispatcher(db_url: str) -> Iterator[list[Conn]]:
    """Three connections opened as the dispatcher opens them, with short timeouts."""
    settings = Settings(database_url=db_url, statement_timeout_ms=5_000, lock_timeout_ms=200)
    conns = [database.connect(settings) for _ in range(3)]
    yield conns
    for each in conns:
        each.close()


HOLDS = {
    "select for update": "SELECT id FROM duly_duty WHERE id = ANY(%s) FOR UPDATE",
    "open transaction that updated them": (
        "UPDATE duly_duty SET name = name || '!' WHERE id = ANY(%s)"
    ),
}


@pytest.mark.parametrize("hold", HOLDS)
@pytest.mark.parametrize("connections", [1, 3])
def test_duties_locked_by_another_session_are_set_aside_and_the_rest_is_dispatched(
    conn: Conn, dispatcher: list[Conn], holder: Conn, connections: int, hold: str
) -> None:
    insert_duties(conn, [duty(f"d{n:02}") for n in range(20)])
    holder.execute(HOLDS[hold], (list(LOCKED),))

    conns = dispatcher[:connections]
    report = dispatch(conns, RunRequest(now=NOW), runtime(chunk_size=8))

    assert task_count(conn) == 17
    assert (report.set_aside_ids, len(report.set_aside)) == (LOCKED, 3)
    # Set aside, not faults: the run is degraded, and the next run owes them again.
    assert (report.tasks_created, report.complete, report.degraded) == (17, True, True)
    assert [each["duty_id"] for each in report.as_json()["set_aside"]] == list(LOCKED)

    holder.rollback()
    rest = dispatch(conns, RunRequest(now=NOW), runtime(chunk_size=8))
    # The others' accounts say their periods are dispatched: only the three are read as owing.
    assert (rest.tasks_created, rest.tasks_existing, rest.set_aside) == (3, 0, ())
    assert rest.duties_owing == 3


def test_the_dispatchers_sessions_give_up_waiting_for_a_lock_and_for_an_idle_transaction(
    dispatcher: list[Conn],
) -> None:
    shown = (
        dispatcher[0]
        .execute(
            "SELECT current_setting('lock_timeout'),"
            " current_setting('idle_in_transaction_session_timeout')"
        )
        .fetchone()
    )
    assert shown is not None
    assert shown[0] == "200ms"
    assert shown[1] != "0"
    # A client that vanished mid-statement is noticed while it runs (ADR 0003).
    check = dispatcher[0].execute("SHOW client_connection_check_interval").fetchone()
    assert check is not None
    assert check[0] != "0"


def test_a_page_whose_lock_is_released_meanwhile_is_dispatched_when_tried_again(
    conn: Conn, dispatcher: list[Conn], holder: Conn
) -> None:
    insert_duties(conn, [duty(f"d{n:02}") for n in range(20)])
    holder.execute("SELECT id FROM duly_duty WHERE id = 'd03' FOR UPDATE")
    asked = 0

    def should_stop() -> bool:
        # Asked before each page: the first page waits for d03 and is put back,
        # the two others run, and the lock is gone before the first is tried again.
        nonlocal asked
        asked += 1
        if asked == 4:
            holder.rollback()
        return False

    report = dispatch(
        dispatcher[:1], RunRequest(now=NOW), runtime(chunk_size=8, should_stop=should_stop)
    )

    assert asked == 4
    assert (report.tasks_created, len(report.set_aside), report.complete) == (20, 0, True)
    assert report.last_duty_id == "d19"


def test_the_lock_timeout_is_read_from_the_environment() -> None:
    assert Settings.from_environ({"DB_LOCK_TIMEOUT_MS": "750"}).lock_timeout_ms == 750
    with pytest.raises(ConfigurationError, match="DB_LOCK_TIMEOUT_MS"):
        Settings.from_environ({"DB_LOCK_TIMEOUT_MS": "0"})

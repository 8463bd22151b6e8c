"""One run's pages shared among several connections (``dispatch([conn, *helpers], ...)``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

import psycopg
import pytest

from dispatch_fn.planning import RunRequest, plan_dispatch
from dispatch_fn.run import dispatch
from runtimes import runtime
from support import (
    NOW,
    duty,
    insert_duties,
    last_dispatched,
    latest_keys,
    multiset,
    task_count,
    task_rows,
)

ZONES = ("UTC", "Asia/Shanghai", "America/Los_Angeles", "Pacific/Kiritimati")
FREQUENCIES = ("daily", "weekly", "fortnightly", "monthly", "quarterly")

type Conn = psycopg.Connection[Any]


def _duties(count: int) -> list[dict[str, Any]]:
    return [
        duty(
            f"d{n:03}",
            organization_id=f"org-{n % 3}",
            frequency=FREQUENCIES[n % len(FREQUENCIES)],
            timezone=ZONES[n % len(ZONES)],
            lead_days=n % 15,
        )
        for n in range(count)
    ]


class _PagesSeen(Sequence[tuple[int, int]]):
    """``(backend pid, pages in flight as it started)`` per page statement, as the server logged."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    def _rows(self) -> list[tuple[int, int]]:
        rows = self._conn.execute(
            "SELECT p.pid, (SELECT count(*) FROM page_log q"
            "               WHERE q.started <= p.started AND q.ended > p.started)"
            " FROM page_log p ORDER BY p.started"
        ).fetchall()
        return [(int(pid), int(depth)) for pid, depth in rows]

    def __len__(self) -> int:
        return len(self._rows())

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[int, int]]: ...

    def __getitem__(self, index: int | slice) -> tuple[int, int] | Sequence[tuple[int, int]]:
        return self._rows()[index]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self._rows())


@pytest.fixture
def pages_seen(conn: Conn) -> Sequence[tuple[int, int]]:
    """Every page statement's backend and concurrency, each held open 20 ms longer.

    The server logs them: a statement trigger on duly_task, which each page's
    insert fires once, sleeps and records when it ran and in which backend. The
    pause gives every connection's thread time to take pages, so that the test
    sees them share the work rather than one thread finishing it alone.
    """
    conn.execute("CREATE TABLE page_log (pid int, started timestamptz, ended timestamptz)")
    conn.execute(
        """
        CREATE FUNCTION log_page() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            started timestamptz := clock_timestamp();
        BEGIN
            PERFORM pg_sleep(0.02);
            INSERT INTO page_log VALUES (pg_backend_pid(), started, clock_timestamp());
            RETURN NULL;
        END $$
        """
    )
    conn.execute(
        "CREATE TRIGGER log_page BEFORE INSERT ON duly_task"
        " FOR EACH STATEMENT EXECUTE FUNCTION log_page()"
    )
    return _PagesSeen(conn)


def test_connections_share_the_pages_and_insert_exactly_what_one_connection_would(
    conn: Conn, helpers: list[Conn], pages_seen: Sequence[tuple[int, int]]
) -> None:
    duties = _duties(60)
    insert_duties(conn, duties)
    report = dispatch([conn, *helpers], RunRequest(now=NOW), runtime(chunk_size=7))
    plan = plan_dispatch(duties, NOW)
    assert multiset(task_rows(conn)) == multiset(plan.drafts)
    assert (report.tasks_created, report.tasks_existing) == (len(plan.drafts), 0)
    assert report.duties_read == len(duties)
    assert report.pages == 9  # ceil(60 / 7): every page once, none empty
    assert (report.complete, report.last_duty_id) == (True, "d059")
    assert {pid for pid, _ in pages_seen} == {c.info.backend_pid for c in (conn, *helpers)}
    assert max(depth for _, depth in pages_seen) > 1  # pages really ran at the same time
    latest = latest_keys((d["id"] for d in duties), plan.drafts)
    assert None not in latest.values()  # every duty was owed a task
    assert last_dispatched(conn) == latest

    again = dispatch([conn, *helpers], RunRequest(now=NOW), runtime(chunk_size=7))
    assert (again.tasks_created, again.tasks_existing, again.duties_owing) == (0, 0, 0)


@pytest.mark.parametrize("pages_allowed", range(10))
def test_a_stopped_run_reports_an_id_below_which_no_duty_was_left_behind(
    conn: Conn, helpers: list[Conn], pages_seen: Sequence[tuple[int, int]], pages_allowed: int
) -> None:
    duties = _duties(60)
    insert_duties(conn, duties)
    asked = 0
    lock = threading.Lock()

    def should_stop() -> bool:
        nonlocal asked
        with lock:
            asked += 1
            return asked > pages_allowed

    report = dispatch(
        [conn, *helpers],
        RunRequest(now=NOW),
        runtime(chunk_size=7, should_stop=should_stop),
    )
    assert len(pages_seen) == min(pages_allowed, 9)
    dispatched = {row[0] for row in conn.execute("SELECT DISTINCT duty_id FROM duly_task")}
    mark = report.last_duty_id
    behind = {d["id"] for d in duties if mark is not None and d["id"] <= mark}
    assert behind <= dispatched
    assert report.complete is (pages_allowed >= 9)

    rest = dispatch([conn, *helpers], RunRequest(now=NOW), runtime(chunk_size=7))
    assert rest.complete
    assert rest.tasks_created + report.tasks_created == task_count(conn)
    # The duties the stopped run dispatched have their accounts kept: not owed again.
    assert rest.tasks_existing == 0
    assert multiset(task_rows(conn)) == multiset(plan_dispatch(duties, NOW).drafts)


def test_a_run_refuses_a_helper_that_would_make_it_one_long_transaction(
    conn: Conn, db_url: str
) -> None:
    with psycopg.connect(db_url) as manual, pytest.raises(ValueError, match="autocommit"):
        dispatch([conn, manual], RunRequest(now=NOW))

"""page_write_rerun.sql writes what page_write.sql writes and reports the same pages.

The planner chooses between them per page (``page_plan.rows_mostly_present``)
for cost alone, so a wrong choice must never show in a row or a count: here
each scenario runs once with every page through page_write.sql and once with
every page through its probing variant, each on a database of its own set up
alike, and the two are compared whole.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from dispatch_fn.db import Connection, PageResult
from dispatch_fn.db import dispatch_page as write_page
from dispatch_fn.planning import RunRequest, Window
from dispatch_fn.run import RunReport, Runtime, dispatch
from runtimes import runtime
from support import NOW, cloned_database, duty, insert_duties, last_dispatched, task_rows

type Conn = psycopg.Connection[Any]

ZONES = ("UTC", "Asia/Shanghai", "America/Los_Angeles", "Pacific/Kiritimati")
FREQUENCIES = ("daily", "weekly", "fortnightly", "monthly", "quarterly", "yearly")
ANCHORS = ("period_start", "period_end", "after_period_end")
ROLLS = ("none", "following", "preceding", "modified_following")
# Small pages, so that a run takes many and the page results are many.
TUNING = runtime(chunk_size=7)


def _duties(count: int) -> list[dict[str, Any]]:
    return [
        duty(
            f"d{n:03}",
            organization_id=f"org-{n % 3}",
            owner_id=f"owner-{n % 5}",
            frequency=FREQUENCIES[n % len(FREQUENCIES)],
            timezone=ZONES[n % len(ZONES)],
            lead_days=(n * 7) % 40,
            due_anchor=ANCHORS[n % len(ANCHORS)],
            due_offset_days=n % 4,
            due_roll=ROLLS[(n // 3) % len(ROLLS)],
            grace_days=n % 3,
            effective_to=(NOW - timedelta(days=20)).date() if n % 11 == 0 else None,
        )
        for n in range(count)
    ]


def _through(probing: Callable[[Connection], bool]) -> tuple[Runtime, list[PageResult]]:
    """A runtime whose pages each run the variant ``probing`` names for its connection.

    Also returns the list the pages' results are appended to, in the order they ended.
    """
    seen: list[PageResult] = []
    lock = threading.Lock()

    def dispatch_page(conn: Connection, *args: Any, probe: bool = False, **kwargs: Any) -> Any:
        del probe  # the planner's guess, overridden
        result = write_page(conn, *args, probe=probing(conn), **kwargs)
        with lock:
            seen.append(result)
        return result

    return replace(TUNING, dispatch_page=dispatch_page), seen


@pytest.fixture
def twins(server_dsn: str, template_database: str) -> Iterator[tuple[Conn, Conn]]:
    """Two fresh migrated databases: one for page_write.sql, one for page_write_rerun.sql."""
    with ExitStack() as stack:
        urls = [stack.enter_context(cloned_database(server_dsn, template_database)) for _ in "ab"]
        plain, probing = (
            stack.enter_context(psycopg.connect(url, autocommit=True)) for url in urls
        )
        yield plain, probing


def _state(conn: Conn) -> tuple[list[dict[str, Any]], dict[str, str | None]]:
    return task_rows(conn), last_dispatched(conn)


def _run(conn: Conn, *, probe: bool, **request: Any) -> Any:
    through, pages = _through(lambda _: probe)
    report = dispatch([conn], RunRequest(**{"now": NOW, **request}), through)
    return pages, report.as_json()


def _set_up(twins: tuple[Conn, Conn], prepare: Callable[[Conn], None]) -> None:
    for conn in twins:
        insert_duties(conn, _duties(60))
        prepare(conn)


def _compare(twins: tuple[Conn, Conn], **request: Any) -> list[PageResult]:
    plain, probing = twins
    plain_pages, plain_report = _run(plain, probe=False, **request)
    probe_pages, probe_report = _run(probing, probe=True, **request)
    assert probe_pages == plain_pages
    assert probe_report == plain_report
    assert _state(probing) == _state(plain)
    assert len(plain_pages) > 5
    pages: list[PageResult] = plain_pages
    return pages


def _nothing(conn: Conn) -> None:
    del conn


def _dispatched(conn: Conn) -> None:
    # Dispatched, then the accounts forgotten, as on the first run after
    # migration 0012 over a table of tasks: the next run owes rows that exist,
    # the case the probing statement is for (a kept account owes none).
    dispatch([conn], RunRequest(now=NOW), TUNING)
    conn.execute(
        "UPDATE duly_duty SET dispatch_through = NULL, dispatch_next = '0001-01-01',"
        " dispatch_next_at = '0001-01-01 00:00:00+00'"
    )


def _partly_dispatched(conn: Conn) -> None:
    # Some of the run's tasks lost and some duties' marks moved back: the
    # re-run owes those again, and advances the marks it moved back.
    _dispatched(conn)
    conn.execute("DELETE FROM duly_task WHERE id % 3 = 0")
    conn.execute(
        "UPDATE duly_duty SET last_dispatched_period = NULL WHERE right(id, 1) IN ('1', '4')"
    )


def test_a_first_run_writes_the_same_rows_and_reports_the_same_pages(
    twins: tuple[Conn, Conn],
) -> None:
    _set_up(twins, _nothing)
    pages = _compare(twins)
    assert sum(page.created for page in pages) == sum(page.owed for page in pages) > 0


def test_a_re_run_writes_nothing_either_way_and_reports_the_same_pages(
    twins: tuple[Conn, Conn],
) -> None:
    _set_up(twins, _dispatched)
    pages = _compare(twins)
    assert sum(page.created for page in pages) == 0 < sum(page.owed for page in pages)


def test_a_partial_re_run_writes_the_same_missing_rows_and_advances_the_same_duties(
    twins: tuple[Conn, Conn],
) -> None:
    _set_up(twins, _partly_dispatched)
    pages = _compare(twins)
    created = sum(page.created for page in pages)
    assert 0 < created < sum(page.owed for page in pages)
    assert sum(page.advanced for page in pages) > 0


def test_a_later_clock_writes_the_same_new_rows_beside_those_that_exist(
    twins: tuple[Conn, Conn],
) -> None:
    _set_up(twins, _dispatched)
    pages = _compare(twins, now=NOW + timedelta(days=9))
    created = sum(page.created for page in pages)
    assert 0 < created < sum(page.owed for page in pages)


def test_a_backfill_writes_the_same_rows_through_either_statement(twins: tuple[Conn, Conn]) -> None:
    _set_up(twins, _partly_dispatched)
    window = Window(NOW.date() - timedelta(days=120), NOW.date())
    pages = _compare(twins, window=window)
    assert sum(page.created for page in pages) > 0


@pytest.mark.parametrize("head_start", ["plain first", "probing first"])
def test_concurrent_runs_one_probing_one_not_write_each_task_once(
    twins: tuple[Conn, Conn], db_url: str, head_start: str
) -> None:
    # Two runs of the same clock over the same duties at once, one through
    # each statement, meet on the same rows; between them they write what one
    # run alone writes (twins[0]), each task once, whoever gets there first.
    alone, _ = twins
    insert_duties(alone, _duties(60))
    plain, _ = _through(lambda _: False)
    dispatch([alone], RunRequest(now=NOW), plain)
    with psycopg.connect(db_url, autocommit=True) as setup:
        insert_duties(setup, _duties(60))
    with (
        psycopg.connect(db_url, autocommit=True) as first,
        psycopg.connect(db_url, autocommit=True) as second,
    ):
        probing = second if head_start == "plain first" else first
        shared, pages = _through(lambda conn: conn is probing)
        reports: list[RunReport] = []
        start = threading.Barrier(2)

        def run(conn: Conn) -> None:
            start.wait()
            reports.append(dispatch([conn], RunRequest(now=NOW), shared))

        threads = [threading.Thread(target=run, args=(conn,)) for conn in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(reports) == 2
        assert _state(first) == _state(alone)
        single = task_rows(alone)
        assert sum(report.tasks_created for report in reports) == len(single)
        assert sum(page.created for page in pages) == len(single)

"""A run stopped by its deadline says whether anything was left for the next run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import date
from typing import Any

import psycopg
import pytest

from dispatch_fn.db import PageResult, dispatch_page
from dispatch_fn.planning import RunRequest, Scope, Window
from dispatch_fn.run import Deadline, dispatch
from runtimes import runtime
from support import NOW, duty, insert_duties, refuse_tasks, task_count

type Conn = psycopg.Connection[Any]


def _stop_after(pages: int) -> Callable[[], bool]:
    asked = 0

    def should_stop() -> bool:
        nonlocal asked
        asked += 1
        return asked > pages

    return should_stop


@pytest.mark.parametrize("connections", [1, 3])
def test_a_deadline_after_a_last_page_exactly_full_still_reports_the_run_complete(
    conn: Conn, helpers: list[Conn], connections: int
) -> None:
    insert_duties(conn, [duty(f"d{n:02}") for n in range(14)])
    report = dispatch(
        [conn, *helpers][:connections],
        RunRequest(now=NOW),
        runtime(chunk_size=7, should_stop=_stop_after(2)),
    )
    assert task_count(conn) == 14
    assert (report.tasks_created, report.pages) == (14, 2)
    assert (report.complete, report.last_duty_id) == (True, "d13")


@pytest.mark.parametrize("connections", [1, 3])
def test_a_deadline_before_the_last_duties_reports_the_run_incomplete(
    conn: Conn, helpers: list[Conn], connections: int
) -> None:
    insert_duties(conn, [duty(f"d{n:02}") for n in range(15)])
    report = dispatch(
        [conn, *helpers][:connections],
        RunRequest(now=NOW),
        runtime(chunk_size=7, should_stop=_stop_after(2)),
    )
    assert task_count(conn) == 14
    assert (report.complete, report.last_duty_id) == (False, "d13")


def test_what_a_stopped_run_set_aside_past_its_mark_is_left_to_the_continuation(
    conn: psycopg.Connection[Any], holder: psycopg.Connection[Any]
) -> None:
    # Pages of 4 over d00..d15: (d03, d07] waits on d05's lock and is put
    # back, (d07, d11] sets aside the refused d09, the later pages run, and
    # the deadline comes before (d03, d07] is tried again: the mark is d03.
    insert_duties(conn, [duty(f"d{n:02}") for n in range(16)])
    refuse_tasks(conn, "NEW.duty_id = 'd09'")
    holder.execute("SELECT id FROM duly_duty WHERE id = 'd05' FOR UPDATE")
    conn.execute("SET lock_timeout = '200ms'")
    last_page_done = False

    def writer(*args: Any, **kwargs: Any) -> PageResult:
        nonlocal last_page_done
        result = dispatch_page(*args, **kwargs)
        last_page_done = last_page_done or args[2] == "d15"
        return result

    stopped = dispatch(
        [conn],
        RunRequest(now=NOW),
        replace(runtime(should_stop=lambda: last_page_done, chunk_size=4), dispatch_page=writer),
    )
    holder.rollback()
    rest = dispatch(
        [conn], RunRequest(now=NOW, scope=Scope(resume_after="d03")), runtime(chunk_size=4)
    )

    assert (stopped.complete, stopped.last_duty_id) == (False, "d03")
    # Before: d09 a fault of both, and read by both: the continuation reads it again.
    assert [fault.duty_id for fault in (*stopped.faults, *rest.faults)] == ["d09"]
    assert stopped.duties_read + rest.duties_read == 16


def test_halves_a_step_committed_before_its_deadline_are_not_read_again_by_the_continuation(
    conn: psycopg.Connection[Any],
) -> None:
    # A backfill in pages of 4: (d03, d07] is refused for d05 and split. Its
    # statements: [d04, d05] refused, [d04] commits, and the deadline comes
    # before [d05]: the step settled through d04.
    insert_duties(conn, [duty(f"d{n:02}") for n in range(12)])
    refuse_tasks(conn, "NEW.duty_id = 'd05'")
    window = Window(date(2026, 1, 1), date(2026, 6, 30))
    statements = 0

    def time_left_ms() -> float:
        nonlocal statements
        statements += 1
        return 0 if statements >= 5 else 600_000  # the fifth statement: [d05]

    stopped = dispatch(
        [conn],
        RunRequest(now=NOW, window=window),
        runtime(
            should_stop=lambda: statements >= 5,
            deadline=Deadline(time_left_ms, 300_000),
            chunk_size=4,
        ),
    )
    assert (stopped.complete, stopped.last_duty_id) == (False, "d04")
    rest = dispatch(
        [conn],
        RunRequest(now=NOW, window=window, scope=Scope(resume_after=stopped.last_duty_id)),
        runtime(chunk_size=4),
    )

    # Before: the mark stayed at d03, and the continuation read d04 again,
    # its six tasks existing: (13, 6) against one run's (12, 0).
    assert (stopped.duties_read + rest.duties_read, rest.tasks_existing) == (12, 0)

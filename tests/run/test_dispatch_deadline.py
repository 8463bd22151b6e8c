"""A run stopped by its deadline says whether anything was left for the next run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from dispatch_fn.planning import RunRequest
from dispatch_fn.run import dispatch
from runtimes import runtime
from support import NOW, duty, insert_duties, task_count

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

"""A duty edited while a run is on its pages (docs/contract.md#account).

A run plans before its pages: one schedule per group of duties, for the
widest lead it counts, and the due rules it judges. A duty edited after that
into values the run did not plan for is left as the edit left it, and the
next run judges it, as if the edit had come after the run. Each edit here is
committed on another connection just before the run's first page, and the run
is replayed through the handler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest

from dispatch_fn.aws.invocation import handle, runtime_for
from dispatch_fn.db import dispatch_page
from support import Conn, clock_event, duty, insert_duties, task_keys

DAY = timedelta(days=1)
FIRST = datetime(2026, 11, 20, 1, 0, tzinfo=UTC)


def _run(
    settings: Any, connections: Any, at: datetime, before_pages: Callable[[], None] | None = None
) -> dict[str, Any]:
    """The scheduled run at ``at``, with ``before_pages`` done as its first page starts."""
    runtime = runtime_for(None, settings, connections, clock=lambda: datetime.now(UTC))
    if before_pages is not None:
        edits = [before_pages]

        def page(*args: Any, **kwargs: Any) -> Any:
            while edits:
                edits.pop()()
            return dispatch_page(*args, **kwargs)

        runtime = replace(runtime, dispatch_page=page)
    return handle(clock_event(at), None, runtime)


def _edit(db_url: str, statement: str) -> Callable[[], None]:
    def edit() -> None:
        with psycopg.connect(db_url, autocommit=True) as editor:
            editor.execute(statement)

    return edit


def _days(first: datetime, count: int) -> list[str]:
    return [(first + n * DAY).date().isoformat() for n in range(count)]


@pytest.mark.parametrize(
    ("before", "edit"),
    [
        pytest.param(
            {"lead_days": 7, "status": "paused"},
            "UPDATE duly_duty SET status = 'active' WHERE id = 'd2'",
            id="resumed",
        ),
        pytest.param(
            {"lead_days": 4, "status": "paused"},
            "UPDATE duly_duty SET status = 'active', lead_days = 7 WHERE id = 'd2'",
            id="resumed_with_a_wider_lead",
        ),
    ],
)
def test_a_lead_wider_than_its_group_was_planned_for_loses_no_day_it_opens(
    conn: Conn, settings: Any, connections: Any, db_url: str, *, before: dict[str, Any], edit: str
) -> None:
    # d1 is its group's widest lead as the run counts it (4); leads 4 to 7
    # share the group, so the run's schedule reaches today + 4 alone.
    insert_duties(
        conn, [duty("d1", frequency="daily", lead_days=4), duty("d2", frequency="daily", **before)]
    )
    _run(settings, connections, FIRST)
    during = _run(settings, connections, FIRST + DAY, _edit(db_url, edit))
    _run(settings, connections, FIRST + 2 * DAY)

    # The run of the 21st set d2 aside, to the next; that one owes its day and
    # the seven its lead opens, as after an edit made after the run of the
    # 21st. Before: 11-21 to 11-26, then 11-29: the 27th and 28th never created.
    assert task_keys(conn, "d2") == _days(FIRST + 2 * DAY, 8)
    assert [(each["duty_id"], each["reason"]) for each in during["set_aside"]] == [("d2", "edited")]


def test_a_roll_set_during_a_run_is_rolled_by_the_run_that_judges_it(
    conn: Conn, settings: Any, connections: Any, db_url: str
) -> None:
    # A monthly duty due on its period's first day; 2026-11-01 is a Sunday.
    insert_duties(conn, [duty("d1"), duty("d2", status="paused")])
    resume = "UPDATE duly_duty SET status = 'active', due_roll = 'following' WHERE id = 'd2'"
    _run(settings, connections, FIRST, _edit(db_url, resume))
    assert task_keys(conn, "d2") == []
    _run(settings, connections, FIRST + DAY)

    # Before: ('2026-11', 2026-11-01), its due date never rolled.
    rows = conn.execute("SELECT period_key, due_date FROM duly_task WHERE duty_id = 'd2'")
    assert rows.fetchall() == [("2026-11", date(2026, 11, 2))]


def test_a_calendar_no_engine_knows_set_during_a_run_is_faulted_by_the_run_that_judges_it(
    conn: Conn, settings: Any, connections: Any, db_url: str
) -> None:
    insert_duties(conn, [duty("d1"), duty("d2", status="paused")])
    resume = (
        "UPDATE duly_duty SET status = 'active', due_roll = 'following',"
        " holiday_calendar = 'ZZ' WHERE id = 'd2'"
    )
    during = _run(settings, connections, FIRST, _edit(db_url, resume))
    after = _run(settings, connections, FIRST + DAY)

    # Before: the run of the 20th wrote ('2026-11', 2026-11-01) and no fault.
    assert task_keys(conn, "d2") == []
    assert (during["faults"], [each["duty_id"] for each in after["faults"]]) == ([], ["d2"])


def test_a_duty_naming_the_calendar_empty_is_a_fault_beside_duties_of_no_calendar(
    conn: Conn, settings: Any, connections: Any
) -> None:
    # '' is no calendar the engine knows; a duty with none (null) shares its
    # anchor and roll. The page once told them apart by '' alone.
    insert_duties(conn, [duty("bad", holiday_calendar=""), duty("good")])
    report = _run(settings, connections, FIRST)

    assert [each["duty_id"] for each in report["faults"]] == ["bad"]
    assert (task_keys(conn, "bad"), task_keys(conn, "good")) == ([], ["2026-11"])


def _backfill(
    settings: Any, connections: Any, before_pages: Callable[[], None] | None = None
) -> dict[str, Any]:
    """A backfill of 2026-11-01 to 2026-11-04, ``before_pages`` done as it starts."""
    event = {"from": "2026-11-01", "to": "2026-11-04"}
    runtime = runtime_for(None, settings, connections, clock=lambda: datetime.now(UTC))
    if before_pages is not None:
        edits = [before_pages]

        def page(*args: Any, **kwargs: Any) -> Any:
            while edits:
                edits.pop()()
            return dispatch_page(*args, **kwargs)

        runtime = replace(runtime, dispatch_page=page)
    return handle(event, None, runtime)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param("timezone = 'Asia/Tokyo'", id="a_zone_no_duty_had"),
        pytest.param("frequency = 'weekly'", id="a_frequency_no_duty_had"),
        pytest.param("due_roll = 'following'", id="a_due_rule_no_duty_had"),
    ],
)
def test_a_duty_a_backfill_did_not_plan_for_is_set_aside_and_a_second_backfill_creates_it(
    conn: Conn, settings: Any, connections: Any, db_url: str, edit: str
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily"), duty("d2", frequency="daily")])
    during = _backfill(
        settings, connections, _edit(db_url, f"UPDATE duly_duty SET {edit} WHERE id = 'd2'")
    )

    # Before: no task of d2's, nothing set aside, the backfill not degraded:
    # the scheduled runs never owe a window's past periods, so they were lost
    # in silence.
    assert task_keys(conn, "d2") == []
    assert [(each["duty_id"], each["reason"]) for each in during["set_aside"]] == [("d2", "edited")]
    assert (during["degraded"], during["duties_read"]) == (True, 2)
    again = _backfill(settings, connections)
    assert again["set_aside"] == []
    assert len(task_keys(conn, "d2")) >= 1

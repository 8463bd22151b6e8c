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

from dispatch_fn.aws import handle, runtime_for
from dispatch_fn.db import dispatch_page
from support import Conn, clock_event, duty, insert_duties, task_keys

DAY = timedelta(days=1)
FIRST = datetime(2026, 11, 20, 1, 0, tzinfo=UTC)


def _invoked(
    settings: Any,
    connections: Any,
    event: dict[str, Any],
    before_pages: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """The run ``event`` asks for, with ``before_pages`` done as its first page starts."""
    runtime = runtime_for(None, settings, connections, clock=lambda: datetime.now(UTC))
    if before_pages is not None:
        edits = [before_pages]

        def page(*args: Any, **kwargs: Any) -> Any:
            while edits:
                edits.pop()()
            return dispatch_page(*args, **kwargs)

        runtime = replace(runtime, dispatch_page=page)
    return handle(event, None, runtime)


def _run(
    settings: Any, connections: Any, at: datetime, before_pages: Callable[[], None] | None = None
) -> dict[str, Any]:
    """The scheduled run at ``at``, with ``before_pages`` done as its first page starts."""
    return _invoked(settings, connections, clock_event(at), before_pages)


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

    # The run of the 21st left d2 to the next; that one owes its day and the
    # seven its lead opens, as after an edit made after the run of the 21st.
    # Before: 11-21 to 11-26, then 11-29: the 27th and 28th never created.
    assert task_keys(conn, "d2") == _days(FIRST + 2 * DAY, 8)
    # Nothing is lost, so a scheduled run is not degraded for it.
    assert (during["degraded"], during["set_aside"]) == (False, [])


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
    return _invoked(settings, connections, {"from": "2026-11-01", "to": "2026-11-04"}, before_pages)


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


def _listed(report: dict[str, Any], duty_id: str) -> list[str]:
    """Where the report names ``duty_id``: 'fault:<reason>' and 'set_aside:<reason>'."""
    return [f"fault:{f['reason']}" for f in report["faults"] if f["duty_id"] == duty_id] + [
        f"set_aside:{s['reason']}" for s in report["set_aside"] if s["duty_id"] == duty_id
    ]


@pytest.mark.parametrize("backfill", [False, True], ids=["scheduled", "backfill"])
@pytest.mark.parametrize(
    ("faulted", "edit"),
    [
        pytest.param({"timezone": "Mars/Olympus"}, "timezone = 'Mars/Olympus'", id="zone"),
        pytest.param(
            {"due_roll": "following", "holiday_calendar": "ZZ"},
            "due_roll = 'following', holiday_calendar = 'ZZ'",
            id="calendar",
        ),
        pytest.param({"grace_days": 400}, "grace_days = 400", id="grace_out_of_range"),
    ],
)
def test_a_duty_edited_during_a_run_into_values_the_run_faulted_is_counted_and_left_to_the_next(  # noqa: PLR0917 - the scenario's parts, by name
    conn: Conn,
    settings: Any,
    connections: Any,
    db_url: str,
    backfill: bool,
    faulted: dict[str, Any],
    edit: str,
) -> None:
    # d3 holds the bad value when the run plans (a fault of the run); d2 is
    # edited into the same value just before the first page. Before: d2 in
    # neither faults nor set_aside, duties_read 2 of 3.
    duties = [duty("d1", frequency="daily"), duty("d2", frequency="daily")]
    insert_duties(conn, [*duties, duty("d3", frequency="daily", **faulted)])
    change = _edit(db_url, f"UPDATE duly_duty SET {edit} WHERE id = 'd2'")
    if backfill:
        during = _backfill(settings, connections, change)
    else:
        during = _run(settings, connections, FIRST, change)

    assert task_keys(conn, "d2") == []
    assert during["duties_read"] == 3
    assert _listed(during, "d2") == (["set_aside:edited"] if backfill else [])
    assert [each["duty_id"] for each in during["faults"]] == ["d3"]


@pytest.mark.parametrize("backfill", [False, True], ids=["scheduled", "backfill"])
def test_a_faulted_duty_mended_during_a_run_into_a_group_it_did_not_plan_is_counted_once(
    conn: Conn, settings: Any, connections: Any, db_url: str, *, backfill: bool
) -> None:
    insert_duties(
        conn,
        [
            duty("d1", frequency="daily"),
            duty("d3", frequency="daily", timezone="Mars/Olympus"),
        ],
    )
    change = _edit(db_url, "UPDATE duly_duty SET timezone = 'Asia/Tokyo' WHERE id = 'd3'")
    if backfill:
        during = _backfill(settings, connections, change)
    else:
        during = _run(settings, connections, FIRST, change)

    # A fault of the run as it planned, and nothing else. Before: also set
    # aside (edited), duties_read 3 of 2.
    assert (_listed(during, "d3"), during["duties_read"]) == (["fault:invalid_cadence"], 2)


def test_a_duty_edited_during_a_run_without_changing_its_cadence_does_not_degrade_the_run(
    conn: Conn, settings: Any, connections: Any, db_url: str
) -> None:
    # d2 (monthly, Tokyo, lead 7) is not read on 11-20, so the run plans no
    # Tokyo group; its new owner's edit makes it read mid-run.
    insert_duties(
        conn, [duty("d0", frequency="daily"), duty("d2", timezone="Asia/Tokyo", lead_days=7)]
    )
    _run(settings, connections, FIRST - DAY)
    during = _run(
        settings,
        connections,
        FIRST,
        _edit(db_url, "UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = 'd2'"),
    )
    _run(settings, connections, FIRST + DAY)
    rows = conn.execute(
        "SELECT owner_id, period_key FROM duly_task WHERE duty_id = 'd2' ORDER BY 1, 2"
    ).fetchall()

    # Before: set aside (edited), degraded, for an edit the next run takes up.
    assert (during["set_aside"], during["degraded"]) == ([], False)
    assert [tuple(row) for row in rows] == [("owner-1", "2026-11"), ("owner-2", "2026-11")]


def test_a_lead_widened_during_a_run_near_the_calendar_s_end_is_left_to_the_next_run(
    conn: Conn, settings: Any, connections: Any, db_url: str
) -> None:
    # At 9999-12-01 a weekly duty with a lead of 30 reaches 9999-W52, which
    # ends in year 10000: the planner refuses d1. d2 (lead 16, the same lead
    # bucket) it accepts, on the widest schedule the calendar allows, short
    # of 30 days; d2's lead becomes 30 after the planner judged its page.
    at = datetime(9999, 12, 1, 1, 0, tzinfo=UTC)
    insert_duties(
        conn,
        [
            duty("d1", frequency="weekly", lead_days=30),
            duty("d2", frequency="weekly", lead_days=16),
        ],
    )
    during = _run(
        settings,
        connections,
        at,
        _edit(db_url, "UPDATE duly_duty SET lead_days = 30 WHERE id = 'd2'"),
    )
    written = task_keys(conn, "d2")
    after = _run(settings, connections, at + DAY)

    # Before: 9999-W48 to W51 written at lead 30, which the run never planned.
    assert written == []
    assert (during["duties_read"], _listed(after, "d2")) == (2, ["fault:invalid_cadence"])

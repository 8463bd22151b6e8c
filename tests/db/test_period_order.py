"""Periods compare by when they start (migration 0007), whatever frequency spelled them."""

from __future__ import annotations

from datetime import date, datetime, time
from functools import partial
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch_fn.engine import FREQUENCIES, periods
from dispatch_fn.errors import YearOutOfRangeError
from support import Conn, Invoke, duty, insert_duties, last_dispatched, task_keys

_DAYS = st.dates(min_value=date(1583, 1, 1), max_value=date(9999, 12, 31))


def _first_days(conn: Conn, keys: list[str]) -> list[date | None]:
    rows = conn.execute(
        "SELECT duly_period_first_day(k) FROM unnest(%s::text[]) WITH ORDINALITY AS u(k, n)"
        " ORDER BY n",
        (keys,),
    ).fetchall()
    return [row[0] for row in rows]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.sampled_from(FREQUENCIES), _DAYS), min_size=1, max_size=40))
def test_the_sql_first_day_of_a_key_is_the_engines_for_every_frequency(
    conn: Conn, drawn: list[tuple[str, date]]
) -> None:
    keyed = []
    for frequency, day in drawn:
        instant = datetime.combine(day, time(12), tzinfo=periods.zone("UTC"))
        try:
            key = periods.period_key_for(frequency, instant, "UTC")
        except YearOutOfRangeError:  # a week of 9999's end that runs into 10000
            continue
        keyed.append((frequency, key))
    expected = [periods.period_days(frequency, key)[0] for frequency, key in keyed]
    assert _first_days(conn, [key for _, key in keyed]) == expected


def test_the_sql_first_day_of_the_edge_keys_is_the_engines(conn: Conn) -> None:
    keys = [
        ("weekly", "2026-W01"), ("weekly", "2026-W53"), ("weekly", "2020-W53"),
        ("weekly", "1583-W01"), ("fortnightly", "2027-W01"), ("fortnightly", "2026-W53"),
        ("daily", "2024-02-29"), ("daily", "9999-12-31"), ("monthly", "1583-01"),
        ("quarterly", "2026-Q4"), ("semiannual", "2026-H2"), ("annual", "9999"),
    ]  # fmt: skip
    expected = [periods.period_days(frequency, key)[0] for frequency, key in keys]
    assert _first_days(conn, [key for _, key in keys]) == expected


def test_a_key_no_frequency_spells_has_no_first_day_and_raises_nothing(conn: Conn) -> None:
    odd = [
        "",
        "2026-",
        "2026-W5",
        "2026-Q5",
        "2026-H3",
        "2026-13",
        "2026-00",
        "0000-01",
        "x",
        "20260",
    ]
    assert _first_days(conn, odd) == [None] * len(odd)


def _switch(conn: Conn, frequency: str) -> None:
    conn.execute("UPDATE duly_duty SET frequency = %s WHERE id = 'd1'", (frequency,))


def _runs(invoke: Invoke, *clocks: str) -> list[dict[str, Any]]:
    return [invoke({"scheduled_time": clock}) for clock in clocks]


def test_a_duty_moved_from_weekly_to_monthly_marks_its_monthly_period(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="weekly", lead_days=0)])
    invoke = partial(invoke, catch_up_days=0)
    _runs(invoke, "2026-11-10T01:00:00Z")
    assert last_dispatched(conn) == {"d1": "2026-W46"}
    _switch(conn, "monthly")
    (report,) = _runs(invoke, "2026-12-01T01:00:00Z")
    assert report["tasks_created"] == report["duties_advanced"] == 1
    assert task_keys(conn) == ["2026-12", "2026-W46"]
    assert last_dispatched(conn) == {"d1": "2026-12"}


def test_a_duty_moved_from_monthly_to_daily_marks_its_daily_period(
    conn: Conn, invoke: Invoke
) -> None:
    # A monthly duty with a week's lead has marked December by late November.
    insert_duties(conn, [duty("d1", frequency="monthly", lead_days=7)])
    invoke = partial(invoke, catch_up_days=0)
    _runs(invoke, "2026-11-28T01:00:00Z")
    assert last_dispatched(conn) == {"d1": "2026-12"}
    conn.execute("UPDATE duly_duty SET frequency = 'daily', lead_days = 0 WHERE id = 'd1'")
    _runs(invoke, "2026-11-30T01:00:00Z")
    # November 30th starts before December: the mark stays where it is.
    assert last_dispatched(conn) == {"d1": "2026-12"}
    _runs(invoke, "2026-12-02T01:00:00Z")
    assert last_dispatched(conn) == {"d1": "2026-12-02"}


def test_a_duty_moved_from_daily_to_annual_marks_its_annual_period(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    invoke = partial(invoke, catch_up_days=0)
    _runs(invoke, "2026-12-30T01:00:00Z")
    assert last_dispatched(conn) == {"d1": "2026-12-30"}
    _switch(conn, "annual")
    (report,) = _runs(invoke, "2027-01-01T01:00:00Z")
    assert report["duties_advanced"] == 1
    assert last_dispatched(conn) == {"d1": "2027"}


def test_a_duty_moved_from_quarterly_to_monthly_marks_its_monthly_period(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="quarterly", lead_days=0)])
    invoke = partial(invoke, catch_up_days=0)
    _runs(invoke, "2026-10-05T01:00:00Z")
    assert last_dispatched(conn) == {"d1": "2026-Q4"}
    _switch(conn, "monthly")
    _runs(invoke, "2026-11-05T01:00:00Z")
    assert last_dispatched(conn) == {"d1": "2026-11"}


def test_a_dry_run_after_a_frequency_change_counts_the_advance_the_run_makes(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="weekly", lead_days=0)])
    invoke = partial(invoke, catch_up_days=0)
    _runs(invoke, "2026-11-10T01:00:00Z")
    _switch(conn, "monthly")
    dry = invoke({"now": "2026-12-01T01:00:00Z", "dry_run": True})
    (real,) = _runs(invoke, "2026-12-01T01:00:00Z")
    assert dry["duties_advanced"] == real["duties_advanced"] == 1


def test_an_unreadable_stored_key_is_replaced_by_the_runs_key(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("d1", lead_days=0, last_dispatched_period="zz-hand-edited")])
    (report,) = _runs(invoke, "2026-12-01T01:00:00Z")
    assert report["duties_advanced"] == 1
    assert last_dispatched(conn) == {"d1": "2026-12"}


def test_the_first_day_function_is_inlined_into_the_never_regress_test(
    conn: psycopg.Connection[Any],
) -> None:
    # Inlined, it costs an expression per updated row instead of a function call.
    plan = conn.execute(
        "EXPLAIN (VERBOSE, COSTS OFF) SELECT duly_period_first_day(k)"
        " FROM (VALUES ('2026-W46'), ('2026-12')) v(k)"
    ).fetchall()
    text = "\n".join(str(row[0]) for row in plan)
    assert "duly_period_first_day" not in text
    assert "make_date" in text

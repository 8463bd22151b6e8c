"""A scheduled run reads what is owed (docs/contract.md#account, migration 0014).

Each duty's account carries the local day it next owes something
(``dispatch_next``); a scheduled run reads, through an index, only the duties
whose day has come. Passing a duty over must be the same as reading it: the
property test runs every duty twice, once as the index lets it be passed over
and once read at every run, and the tasks must be the same.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch_fn.engine import FREQUENCIES, ROLLS, periods
from support import Conn, Invoke, clock_event, duty, insert_duties, task_keys

DAY = timedelta(days=1)
FIRST = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
ZONES = ("UTC", "Europe/Berlin", "America/Los_Angeles", "Pacific/Kiritimati", "Asia/Kathmandu")


def _next_days(conn: Conn) -> dict[str, date]:
    rows = conn.execute("SELECT id, dispatch_next FROM duly_duty ORDER BY id").fetchall()
    return {str(duty_id): day for duty_id, day in rows}


def test_a_run_at_the_same_clock_again_reads_no_duty(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("m"), duty("d", frequency="daily"), duty("p", status="paused")])
    first = invoke(clock_event(FIRST))
    again = invoke(clock_event(FIRST))

    assert first["duties_read"] == 3
    # The paused duty is counted from its index, never read; the others owe nothing.
    assert (again["duties_read"], again["tasks_created"]) == (1, 0)
    assert (again["skipped"]["not_active"], again["skipped"]["nothing_due"]) == (1, 0)


def test_the_next_day_reads_the_daily_duty_and_passes_the_monthly_one_over(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("m"), duty("d", frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    # April becomes owed as its seven days' lead reaches it.
    assert _next_days(conn) == {"d": date(2026, 3, 2), "m": date(2026, 3, 25)}

    next_day = invoke(clock_event(FIRST + DAY))

    assert (next_day["duties_read"], next_day["tasks_created"]) == (1, 1)


def test_a_lead_that_reaches_the_next_period_before_its_due_date_does_not_read_it_early(
    conn: Conn, invoke: Invoke
) -> None:
    # April's due date is its last day, so its seven days' lead reaches it on
    # April 23 and it becomes owed as April starts (plan.became_owed_on); a
    # week due on its Friday, lead 7, becomes owed three days before it starts
    # (March 9's week on March 6).
    insert_duties(
        conn,
        [
            duty("m", due_anchor="period_end", lead_days=7),
            duty("w", frequency="weekly", due_offset_days=4, lead_days=7),
        ],
    )
    invoke(clock_event(FIRST))
    assert _next_days(conn) == {"m": date(2026, 4, 1), "w": date(2026, 3, 6)}

    week = [invoke(clock_event(FIRST + days * DAY)) for days in range(1, 6)]

    assert [each["duties_read"] for each in week] == [0, 0, 0, 0, 1]
    assert [each["tasks_created"] for each in week] == [0, 0, 0, 0, 1]


def test_a_duty_in_a_zone_behind_utc_is_not_read_before_its_day_begins_there(
    conn: Conn, invoke: Invoke
) -> None:
    # At 01:00 UTC on March 1 it is still February 28 in Los Angeles: the
    # daily duty owes that day, and its next day begins at 08:00 UTC (PST).
    insert_duties(
        conn, [duty("la", frequency="daily", lead_days=0, timezone="America/Los_Angeles")]
    )
    first = invoke(clock_event(FIRST))
    again = invoke(clock_event(FIRST))
    # Read no earlier than its midnight less its zone's widest offset (PDT).
    early = invoke(clock_event(FIRST + timedelta(hours=5, minutes=59)))
    begun = invoke(clock_event(FIRST + timedelta(hours=7)))

    assert (first["duties_read"], first["tasks_created"]) == (1, 1)
    assert [each["duties_read"] for each in (again, early)] == [0, 0]
    assert (begun["duties_read"], begun["tasks_created"]) == (1, 1)
    assert task_keys(conn, "la") == ["2026-02-28", "2026-03-01"]


def test_an_edit_sends_the_duty_back_to_the_next_run(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("m")])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET frequency = 'daily', lead_days = 0 WHERE id = 'm'")
    assert _next_days(conn) == {"m": date(1, 1, 1)}

    changed = invoke(clock_event(FIRST + DAY))

    assert (changed["duties_read"], changed["tasks_created"]) == (1, 1)


def test_a_duty_outside_its_window_is_next_read_when_the_window_opens_and_never_after_it(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [
            duty("early", frequency="daily", effective_from=date(2026, 3, 10)),
            duty("over", frequency="daily", effective_to=date(2026, 1, 31)),
        ],
    )
    invoke(clock_event(FIRST))
    assert _next_days(conn) == {"early": date(2026, 3, 10), "over": date(9999, 12, 31)}
    assert invoke(clock_event(FIRST + DAY))["duties_read"] == 0


def test_a_run_under_new_rules_reads_every_duty(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("m"), duty("d", frequency="daily")])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_dispatch_run SET rules = 'an older tzdata'")

    rejudged = invoke(clock_event(FIRST))

    assert rejudged["duties_read"] == 2


_FIELDS = st.fixed_dictionaries(
    {
        "frequency": st.sampled_from(FREQUENCIES),
        "timezone": st.sampled_from(ZONES),
        "due_anchor": st.sampled_from(periods.ANCHORS),
        "due_offset_days": st.integers(-20, 20),
        "due_roll": st.sampled_from(ROLLS),
        "holiday_calendar": st.sampled_from([None, "DE-BY", "GB-SCT"]),
        "lead_days": st.sampled_from([-3, 0, 1, 3, 7, 20, 45, 100]),
        "effective_from": st.sampled_from([None, date(2026, 3, 20), date(2026, 5, 1)]),
        "effective_to": st.sampled_from([None, date(2026, 3, 25), date(2026, 4, 15)]),
    }
)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    shapes=st.lists(_FIELDS, min_size=1, max_size=12),
    steps=st.lists(st.integers(1, 40), min_size=3, max_size=8),
)
def test_a_duty_passed_over_gets_the_tasks_it_would_get_if_read_at_every_run(
    conn: Conn, invoke: Invoke, shapes: list[dict[str, Any]], steps: list[int]
) -> None:
    conn.execute("TRUNCATE duly_task, duly_duty, duly_dispatch_run, duly_dispatch_fault CASCADE")
    insert_duties(
        conn,
        [duty(f"{kind}-{n:02}", **shape) for n, shape in enumerate(shapes) for kind in ("a", "b")],
    )
    clock = FIRST
    for hours in steps:
        # b's duties are read by every run: their next day is always "now".
        conn.execute(
            "UPDATE duly_duty SET dispatch_next = '0001-01-01',"
            " dispatch_next_at = '0001-01-01 00:00:00+00' WHERE id LIKE 'b-%'"
        )
        invoke(clock_event(clock))
        clock += timedelta(hours=hours * 6)
    tasks = conn.execute(
        "SELECT left(duty_id, 1), substr(duty_id, 3), owner_id, period_key, due_date,"
        " visible_from, late_after FROM duly_task"
    ).fetchall()
    passed_over = sorted(tuple(row[1:]) for row in tasks if row[0] == "a")
    read_every_time = sorted(tuple(row[1:]) for row in tasks if row[0] == "b")
    assert passed_over == read_every_time


def test_a_duty_whose_window_ends_is_read_the_day_after_as_a_run_reading_it_would_move_it(
    conn: Conn, invoke: Invoke
) -> None:
    # A run that reads it after its window's end moves its account there
    # (the window closed behind it); one that passed it over must not find
    # the account a day older: reassigned later, the duty owes the same.
    insert_duties(
        conn,
        [duty(f"{kind}-m", effective_to=date(2026, 3, 20)) for kind in ("a", "b")],
    )
    for n in range(24):
        if n == 23:
            conn.execute("UPDATE duly_duty SET owner_id = 'owner-2'")
        conn.execute(
            "UPDATE duly_duty SET dispatch_next = '0001-01-01',"
            " dispatch_next_at = '0001-01-01 00:00:00+00' WHERE id = 'b-m'"
        )
        invoke(clock_event(FIRST + n * DAY))
    tasks = conn.execute("SELECT duty_id, owner_id, period_key FROM duly_task").fetchall()

    assert sorted((owner, key) for duty_id, owner, key in tasks if duty_id == "a-m") == sorted(
        (owner, key) for duty_id, owner, key in tasks if duty_id == "b-m"
    )
    assert _next_days(conn)["a-m"] == date(9999, 12, 31)


def test_a_run_at_a_past_clock_reads_what_a_later_run_passed_over(
    conn: Conn, invoke: Invoke
) -> None:
    # The run of the 22nd judged the window over and set the next day to
    # 9999-12-31 (its origin, the 21st, after the window's last day); a run
    # at the 20th's clock, after it, must still read the duty: on the 20th it
    # owes its current period.
    insert_duties(
        conn,
        [
            duty(f"{kind}-d", frequency="daily", lead_days=0, effective_to=date(2026, 3, 20))
            for kind in ("a", "b")
        ],
    )
    invoke(clock_event(datetime(2026, 3, 22, 23, 59, tzinfo=UTC)))
    conn.execute(
        "UPDATE duly_duty SET dispatch_next = '0001-01-01',"
        " dispatch_next_at = '0001-01-01 00:00:00+00' WHERE id = 'b-d'"
    )
    invoke(clock_event(datetime(2026, 3, 20, 23, 59, tzinfo=UTC)))

    assert task_keys(conn, "b-d") == ["2026-03-20"]
    assert task_keys(conn, "a-d") == task_keys(conn, "b-d")


def _a_daily_duty_and_monthly_ones_passed_over_the_next_day(
    conn: Conn, invoke: Invoke, organization_of: Any = lambda n: "org-1"
) -> None:
    """One daily duty and 200 monthly ones, dispatched, and the table analysed."""
    insert_duties(
        conn,
        [duty("a-daily", organization_id="org-a", frequency="daily", lead_days=0)]
        + [duty(f"m{n:03}", organization_id=organization_of(n)) for n in range(200)],
    )
    invoke(clock_event(FIRST))
    conn.execute("ANALYZE duly_duty")  # the planner's statistics, as autovacuum leaves them


def test_a_scheduled_run_estimates_how_many_duties_it_passed_over(
    conn: Conn, invoke: Invoke
) -> None:
    _a_daily_duty_and_monthly_ones_passed_over_the_next_day(conn, invoke)
    report = invoke(clock_event(FIRST + DAY))

    # It read the daily duty; the 200 monthly ones owed nothing and were not read.
    assert (report["duties_read"], report["tasks_created"]) == (1, 1)
    assert 180 <= report["duties_not_read"] <= 220


def test_a_scoped_run_estimates_only_the_duties_of_its_scope_it_passed_over(
    conn: Conn, invoke: Invoke
) -> None:
    # org-a holds the daily duty and 20 monthly ones; org-b 180 the run never considers.
    _a_daily_duty_and_monthly_ones_passed_over_the_next_day(
        conn, invoke, organization_of=lambda n: "org-a" if n < 20 else "org-b"
    )
    report = invoke({**clock_event(FIRST + DAY), "organization_id": "org-a"})

    assert report["duties_read"] == 1
    assert 10 <= report["duties_not_read"] <= 30


def test_a_run_estimates_no_duty_it_passed_over_before_the_table_is_first_analysed(
    conn: Conn, invoke: Invoke
) -> None:
    # Fewer rows than autovacuum analyses after: no statistics yet, no guess.
    insert_duties(conn, [duty(f"d{n}", frequency="daily", lead_days=0) for n in range(4)])
    reports = [invoke(clock_event(FIRST + n * DAY)) for n in range(2)]

    # Before: 130 and 130, the planner's guess from the table's size.
    assert [r["duties_read"] + r["duties_not_read"] for r in reports] == [4, 4]

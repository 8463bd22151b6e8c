"""Between two scheduled runs nothing falls through, through the handler.

Each duty's account says what it owes (docs/contract.md#account), whatever the
time between runs.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from dispatch_fn.errors import ConfigurationError
from dispatch_fn.settings import Settings
from support import Conn, Invoke, duty, insert_duties, task_keys

_GREENLAND = ("America/Nuuk", "America/Scoresbysund")


def _days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def _clocks(first: datetime, last: datetime, every: timedelta) -> list[str]:
    clocks = []
    clock = first
    while clock <= last:
        clocks.append(clock.isoformat().replace("+00:00", "Z"))
        clock += every
    return clocks


def test_a_local_day_never_today_at_one_utc_is_created_by_the_next_daily_run(
    conn: Conn, invoke: Invoke
) -> None:
    # At 01:00 UTC on 2026-03-28 Greenland reads 03-27 23:00; a day later,
    # across the change to summer time, 03-29 00:00: 03-28 is never "today".
    insert_duties(
        conn, [duty(zone, frequency="daily", timezone=zone, lead_days=0) for zone in _GREENLAND]
    )
    first, last = datetime(2026, 3, 25, 1, tzinfo=UTC), datetime(2026, 4, 1, 1, tzinfo=UTC)
    for clock in _clocks(first, last, timedelta(days=1)):
        invoke({"scheduled_time": clock})
    for zone in _GREENLAND:
        assert task_keys(conn, zone) == _days(date(2026, 3, 24), date(2026, 4, 1)), zone


@pytest.mark.parametrize("hours", [1, 6, 8, 12])
def test_runs_at_the_configured_interval_create_every_day_of_their_span_once(
    conn: Conn, invoke: Invoke, hours: int
) -> None:
    insert_duties(
        conn,
        [duty(zone, frequency="daily", timezone=zone, lead_days=0) for zone in _GREENLAND]
        + [duty("apia", frequency="daily", timezone="Pacific/Apia", lead_days=0)],
    )
    first, last = datetime(2026, 3, 27, 1, tzinfo=UTC), datetime(2026, 3, 30, 1, tzinfo=UTC)
    for clock in _clocks(first, last, timedelta(hours=hours)):
        invoke({"scheduled_time": clock}, schedule_interval_hours=hours)
    for zone in _GREENLAND:
        assert task_keys(conn, zone) == _days(date(2026, 3, 26), date(2026, 3, 30)), zone
    assert task_keys(conn, "apia") == _days(date(2026, 3, 27), date(2026, 3, 30))


def test_a_duty_unpaused_between_daily_runs_still_gets_only_its_current_day(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d1", frequency="daily", status="paused", lead_days=0)])
    for clock in _clocks(
        datetime(2026, 8, 15, 1, tzinfo=UTC), datetime(2026, 8, 20, 1, tzinfo=UTC), timedelta(1)
    ):
        invoke({"scheduled_time": clock})
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd1'")
    invoke({"scheduled_time": "2026-08-21T01:00:00Z"})
    assert task_keys(conn) == ["2026-08-21"]


def test_explain_at_the_next_run_says_the_skipped_day_would_be_created(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("nuuk", frequency="daily", timezone="America/Nuuk", lead_days=0)])
    report = invoke({"now": "2026-03-29T01:00:00Z", "dry_run": True, "duty_ids": ["nuuk"]})
    verdicts = {c["period_key"]: c["verdict"] for c in report["explain"]["nuuk"]["candidates"]}
    assert verdicts == {"2026-03-28": "would_create", "2026-03-29": "would_create"}
    assert report["tasks_created"] == 2


def test_an_outage_of_two_days_owes_every_day_since_the_accounts_day(
    conn: Conn, invoke: Invoke
) -> None:
    # Hourly runs, then an outage from 03-27 23:00 UTC to 03-29 23:00 UTC:
    # Antarctica/Troll's 03-28 and its 22-hour 03-29 (00:00-22:00 UTC) were
    # never today at any run, and both became owed after the account's day.
    insert_duties(
        conn, [duty("troll", frequency="daily", timezone="Antarctica/Troll", lead_days=0)]
    )
    invoke({"scheduled_time": "2026-03-27T23:00:00Z"}, schedule_interval_hours=1)
    report = invoke({"scheduled_time": "2026-03-29T23:00:00Z"}, schedule_interval_hours=1)
    assert (report["duties_owing"], report["beyond_horizon"]) == (1, 0)
    assert task_keys(conn, "troll") == ["2026-03-27", "2026-03-28", "2026-03-29", "2026-03-30"]


def test_the_schedule_interval_defaults_to_a_day_and_reads_its_variable() -> None:
    assert Settings.from_environ({}).schedule_interval_hours == 24
    environ = {"DISPATCH_SCHEDULE_INTERVAL_HOURS": "6"}
    assert Settings.from_environ(environ).schedule_interval_hours == 6


@pytest.mark.parametrize("value", ["0", "25", "-6", "six", "1.5"])
def test_a_schedule_interval_outside_1_to_24_hours_is_refused(value: str) -> None:
    expected = r"DISPATCH_SCHEDULE_INTERVAL_HOURS=.*expected an integer from 1 to 24"
    with pytest.raises(ConfigurationError, match=expected):
        Settings.from_environ({"DISPATCH_SCHEDULE_INTERVAL_HOURS": value})

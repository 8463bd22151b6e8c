"""Zones come from the pinned tzdata wheel, strictly named, parsed once."""

from __future__ import annotations

import importlib.metadata
import zoneinfo
from datetime import UTC, date, datetime, timedelta

import pytest

from dispatch_fn.engine import _zones, local_date, local_dates, start_of_day, zone


def test_tzdata_is_the_pinned_release() -> None:
    assert importlib.metadata.version("tzdata") == "2026.6"


def test_zone_is_parsed_once_and_cached() -> None:
    assert zone("Europe/Berlin") is zone("Europe/Berlin")


def test_zone_keeps_its_iana_key() -> None:
    assert zone("Asia/Kathmandu").key == "Asia/Kathmandu"


def test_answers_come_from_the_pinned_tzdata_not_the_host() -> None:
    # tzdata 2026.6 keeps Cuba on -04 through November 2026, where older tz
    # releases (and so some hosts) put it back on -05 on 1 November.
    winter = datetime(2026, 12, 1, 12, tzinfo=UTC).astimezone(zone("America/Havana"))
    assert winter.utcoffset() == timedelta(hours=-4)


def test_every_listed_zone_loads() -> None:
    names = _zones.zone_names()
    assert len(names) > 500
    assert {"UTC", "Europe/Berlin", "America/Santiago", "US/Pacific"} <= names
    for name in names:
        assert _zones.load_zone(name).key == name


def test_loading_zones_leaves_the_global_search_path_alone() -> None:
    before = zoneinfo.TZPATH
    zone("Australia/Lord_Howe")
    _zones.load_zone("Asia/Kathmandu")
    assert before == zoneinfo.TZPATH


def test_local_date_is_the_wall_calendar_date() -> None:
    instant = datetime(2026, 8, 20, 18, 15, tzinfo=UTC)
    assert local_date(instant, "Asia/Kathmandu") == date(2026, 8, 21)
    assert local_date(instant, "America/Los_Angeles") == date(2026, 8, 20)


def test_local_dates_are_each_zone_s_local_date_less_those_past_the_calendar() -> None:
    instant = datetime(2026, 6, 29, 22, 30, tzinfo=UTC)
    shown = local_dates(instant)
    assert shown == {name: local_date(instant, name) for name in _zones.zone_names()}
    assert (shown["CET"], shown["UTC"]) == (date(2026, 6, 30), date(2026, 6, 29))
    # An hour before the calendar's last instant: east of UTC it is year 10000.
    last = local_dates(datetime(9999, 12, 31, 23, tzinfo=UTC))
    assert "UTC" in last
    assert "Africa/Addis_Ababa" not in last


def test_local_date_accepts_any_aware_tzinfo() -> None:
    instant = datetime(2026, 8, 21, 0, 30, tzinfo=zone("Europe/Berlin"))
    assert local_date(instant, "UTC") == date(2026, 8, 20)


@pytest.mark.parametrize(
    ("day", "timezone", "expected"),
    [
        (date(2026, 8, 21), "UTC", datetime(2026, 8, 21, tzinfo=UTC)),
        (date(2026, 8, 21), "Asia/Shanghai", datetime(2026, 8, 20, 16, tzinfo=UTC)),
        (date(2026, 8, 21), "America/Los_Angeles", datetime(2026, 8, 21, 7, tzinfo=UTC)),
    ],
)
def test_start_of_day_is_local_midnight(day: date, timezone: str, expected: datetime) -> None:
    start = start_of_day(day, timezone)
    assert start == expected
    assert (start.date(), start.hour, start.minute) == (day, 0, 0)

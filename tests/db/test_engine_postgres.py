"""Differential test: PostgreSQL's own calendar and tz arithmetic agrees with the engine.

The server only ever maps instants to local dates (``instant AT TIME ZONE
zone``); it is never asked to turn a local time into an instant, where its
rule for gaps and repeats is not ours.

The server's tz database is not ours: pgserver's PostgreSQL 16 bundles its
own (2024-era) and Debian's PostgreSQL 15 reads the system's (2025b, built
with backzone history). Between those and tzdata 2026.6, links such as
``CET`` or ``Africa/Accra`` got other histories, and Mexico, Paraguay,
Morocco and western Canada changed rules. The sample is therefore limited to
canonical zones whose 1900-2037 data all three releases agree on (checked
zone by zone when this list was drawn up) and to instants in 1900-2037.
A disagreement here means the releases diverged, or the engine is wrong:
investigate it, don't widen the tolerance.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

import psycopg
import pytest

from dispatch_fn.engine import FREQUENCIES, local_date, period_key_for, start_of_day

STABLE_ZONES = (
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "Europe/Paris",
    "Europe/Madrid",
    "Europe/Rome",
    "Europe/Warsaw",
    "Europe/Helsinki",
    "Europe/Athens",
    "Europe/Kyiv",
    "Europe/Istanbul",
    "Europe/Moscow",
    "America/New_York",
    "America/Chicago",
    "America/Denver",
    "America/Los_Angeles",
    "America/Phoenix",
    "America/Anchorage",
    "America/Halifax",
    "America/St_Johns",
    "America/Sao_Paulo",
    "America/Argentina/Buenos_Aires",
    "America/Bogota",
    "America/Lima",
    "America/Santiago",
    "Pacific/Honolulu",
    "Asia/Tokyo",
    "Asia/Seoul",
    "Asia/Shanghai",
    "Asia/Hong_Kong",
    "Asia/Singapore",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Asia/Dubai",
    "Asia/Karachi",
    "Asia/Dhaka",
    "Asia/Jakarta",
    "Asia/Tehran",
    "Asia/Jerusalem",
    "Australia/Sydney",
    "Australia/Adelaide",
    "Australia/Perth",
    "Australia/Lord_Howe",
    "Pacific/Auckland",
    "Pacific/Chatham",
    "Africa/Johannesburg",
    "Africa/Nairobi",
    "Africa/Lagos",
    "Africa/Cairo",
)

_EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
_LATEST = datetime(2037, 12, 31, tzinfo=UTC)
_UNIFORM_PER_ZONE = 120
_DAYS_PER_ZONE = 40

# Every key spelled by the server from the local date it computes itself;
# fortnights start on the odd ISO week (so W53 stands alone).
_SERVER_KEYS = """
WITH sample AS (
    SELECT i, (ts AT TIME ZONE z) AS wall
    FROM unnest(%(instants)s::timestamptz[], %(zones)s::text[]) WITH ORDINALITY AS s(ts, z, i)
), parts AS (
    SELECT i, wall, extract(week FROM wall)::int AS iso_week FROM sample
)
SELECT
    to_char(wall, 'YYYY-MM-DD'),
    to_char(wall, 'IYYY-"W"IW'),
    to_char(wall, 'IYYY') || '-W' || lpad((iso_week - 1 + iso_week %% 2)::text, 2, '0'),
    to_char(wall, 'YYYY-MM'),
    to_char(wall, 'YYYY-"Q"Q'),
    to_char(wall, 'YYYY') || '-H' || CASE WHEN extract(month FROM wall) <= 6 THEN '1' ELSE '2' END,
    to_char(wall, 'YYYY')
FROM parts
ORDER BY i
"""


def _sample(rng: random.Random) -> list[tuple[datetime, str]]:
    """Uniform instants, plus instants at and around each sampled zone's local midnights."""
    span = (_LATEST - _EARLIEST).total_seconds()
    cases: list[tuple[datetime, str]] = []
    for zone in STABLE_ZONES:
        cases += [
            (_EARLIEST + timedelta(seconds=rng.uniform(0, span)), zone)
            for _ in range(_UNIFORM_PER_ZONE)
        ]
        for _ in range(_DAYS_PER_ZONE):
            day = date(1901, 1, 1) + timedelta(days=rng.randrange(365 * 136))
            start = start_of_day(day, zone)
            cases += [
                (start, zone),
                (start - timedelta(microseconds=1), zone),
                (start + timedelta(seconds=rng.uniform(-3 * 3600, 3 * 3600)), zone),
            ]
    return cases


@pytest.mark.slow
def test_engine_keys_agree_with_postgresql_calendar_and_tz_arithmetic(server_dsn: str) -> None:
    cases = _sample(random.Random(20260821))
    assert len(cases) > 10_000
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        rows = conn.execute(
            _SERVER_KEYS,
            {"instants": [instant for instant, _ in cases], "zones": [z for _, z in cases]},
        ).fetchall()
    assert len(rows) == len(cases)

    disagreements: dict[str, list[str]] = defaultdict(list)
    for (instant, zone), server_keys in zip(cases, rows, strict=True):
        engine_keys = tuple(period_key_for(frequency, instant, zone) for frequency in FREQUENCIES)
        if engine_keys != tuple(server_keys):
            disagreements[zone].append(
                f"{instant.isoformat()}: engine {engine_keys[0]} ({local_date(instant, zone)}) "
                f"vs server {server_keys}"
            )
    report = "; ".join(
        f"{zone} x{len(found)} e.g. {found[0]}" for zone, found in sorted(disagreements.items())
    )
    assert not disagreements, (
        "engine and server disagree (tz release difference or engine bug): " + report
    )


def test_server_spells_iso_weeks_and_fortnights_like_the_engine(server_dsn: str) -> None:
    """The SQL above is itself checked on the ISO-week corner cases."""
    days = [date(2027, 1, 1), date(2021, 1, 3), date(2026, 1, 1), date(2026, 12, 28)]
    instants = [datetime(d.year, d.month, d.day, 12, tzinfo=UTC) for d in days]
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        rows = conn.execute(
            _SERVER_KEYS, {"instants": instants, "zones": ["UTC"] * len(instants)}
        ).fetchall()
    assert [row[1] for row in rows] == ["2026-W53", "2020-W53", "2026-W01", "2026-W53"]
    assert [row[2] for row in rows] == ["2026-W53", "2020-W53", "2026-W01", "2026-W53"]

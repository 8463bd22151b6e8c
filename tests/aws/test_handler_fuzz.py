"""Whatever arrives as an event, the handler answers with a report or an EventError.

Hostile events through the real handler on a real database: nested, huge,
mistyped, out of range, envelopes with manual fields. A refused event writes
nothing anywhere. ``DULY_SOAK=1`` (``make fuzz``) runs 10,000 of them; the
gate runs a few, fast.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import hypothesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from dispatch_fn.aws.events import MANUAL_FIELDS
from dispatch_fn.errors import EventError
from support import Conn, Invoke, duty, insert_duties

SOAK = os.environ.get("DULY_SOAK") == "1"
MESSAGE_LIMIT = 1_000
REPORT_KEYS = {
    "mode", "now", "window", "dry_run", "duties_read", "tasks_created", "tasks_existing",
    "duties_advanced", "skipped", "faults", "degraded",
}  # fmt: skip

# JSON's "\\ud800" decodes to a lone surrogate; st.text never draws one by itself.
surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
_leaves = (
    surrogates
    | st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**30, max_value=10**40)
    | st.floats()
    | st.text(max_size=12)
)
json_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _nested(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


hostile = (
    json_values | st.integers(1, 3_000).map(_nested) | st.integers(0, 300_000).map("x".__mul__)
)
offsets = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))])
instants = (
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets)
    | st.datetimes(
        min_value=datetime(2020, 1, 1), max_value=datetime(2030, 12, 31), timezones=offsets
    )
).map(datetime.isoformat)
days = st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31)) | st.dates(
    min_value=date(2024, 1, 1), max_value=date(2027, 12, 31)
)
identifiers = (
    st.text(max_size=8)
    | st.sampled_from(["d1", "d2", "org-1", "d\x00", "", "d\ud800"])
    | surrogates
)
FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "now": instants | hostile,
    "from": days.map(date.isoformat) | hostile,
    "to": days.map(date.isoformat) | hostile,
    "dry_run": st.booleans() | hostile,
    "organization_id": identifiers | hostile,
    "duty_ids": st.lists(identifiers, max_size=4) | hostile,
    "resume_after": identifiers | hostile,
    "continuation": st.integers(-2, 25) | hostile,
}
manual_fields = {name: FIELD_VALUES[name] for name in MANUAL_FIELDS}


@st.composite
def backfills(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed window, so accepted backfills are common, not luck."""
    start = draw(st.dates(min_value=date(2024, 1, 1), max_value=date(2027, 1, 1)))
    end = start + timedelta(days=draw(st.integers(-3, 400)))
    return {"from": start.isoformat(), "to": end.isoformat(), "dry_run": draw(st.booleans())}


recent_instants = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31), timezones=offsets
).map(datetime.isoformat)
# Manual payloads that are legal more often than not, so accepted runs are common too.
plausible = st.fixed_dictionaries(
    {},
    optional={
        "now": recent_instants,
        "dry_run": st.booleans(),
        "organization_id": st.sampled_from(["org-1", "org-2", "org-\udfff"]),
        "duty_ids": st.lists(st.sampled_from(["d1", "d2", "d3", "d9"]), min_size=1, max_size=3),
        "resume_after": st.sampled_from(["d1", "d2"]),
        "continuation": st.integers(1, 20),
    },
)
events = st.one_of(
    st.fixed_dictionaries({}, optional=manual_fields),
    plausible,
    backfills(),
    st.fixed_dictionaries(
        {"detail-type": st.just("Scheduled Event") | st.text(max_size=5), "time": instants},
        optional={
            **manual_fields,
            "source": hostile,
            "detail": hostile,
            "scheduled_time": instants,
        },
    ),
    st.fixed_dictionaries({"scheduled_time": instants | hostile}, optional=manual_fields),
    st.dictionaries(st.text(max_size=20), hostile, max_size=4),
    hostile,
)


def _every_row(conn: Conn) -> dict[str, tuple[object, ...]]:
    """Per table, its row count and newest row version: any insert, update or delete shows."""
    tables = conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1"
    ).fetchall()
    prints = {}
    for (table,) in tables:
        # xmin is the transaction that wrote the row version: an update gives a new one.
        query = sql.SQL("SELECT count(*), max(xmin::text::bigint) FROM {}").format(
            sql.Identifier(str(table))
        )
        row = conn.execute(query).fetchone()
        assert row is not None
        prints[str(table)] = tuple(row)
    return prints


@settings(
    max_examples=10_000 if SOAK else 150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(event=events)
def test_every_event_gets_a_report_or_an_event_error_and_a_refusal_writes_nothing(
    conn: Conn, invoke: Invoke, event: object
) -> None:
    # The database outlives the examples: seed it once.
    if conn.execute("SELECT count(*) FROM duly_duty").fetchone() == (0,):
        insert_duties(
            conn,
            [
                duty("d1"),
                duty("d2", frequency="daily", lead_days=0),
                duty("d3", frequency="weekly"),
            ],
        )
    before = _every_row(conn)
    outcome = _outcome(invoke, event)
    if isinstance(outcome, EventError):
        hypothesis.event("refused")
        assert len(str(outcome)) <= MESSAGE_LIMIT
        str(outcome).encode("utf-8")  # printable and loggable, whatever it refused
        assert _every_row(conn) == before
    else:
        hypothesis.event(f"{outcome['mode']} run, dry_run={outcome['dry_run']}")
        assert set(outcome) >= REPORT_KEYS
        assert len(json.dumps(outcome)) < 100_000


def _outcome(invoke: Invoke, event: object) -> dict[str, Any] | EventError:
    """The report, or the refusal; anything else raised fails the test."""
    try:
        return invoke(event)
    except EventError as refused:
        return refused

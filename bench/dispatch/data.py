"""Writing the generated duties server-side, and counting back what was made.

Every column is drawn from a hash of the row number (``hashint8extended``), so
the data is the same on every run and server, and needs no client-side
generation: one ``INSERT … SELECT generate_series`` writes it all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Final

from psycopg import sql

from bench.dispatch.mix import (
    BIG_ORG,
    BUSINESS_UNITS_PER_ORG,
    HOLIDAY_CALENDARS,
    HOME_ZONE_PERMILLE,
    NAMES,
    ORGANISATIONS,
    OWNERS_PER_ORG,
    ZONES,
    Choice,
    Mix,
    Tail,
)
from bench.dispatch.server import DISPATCH_TABLES, BenchError, Conn, leaves

# The schedule's own time on a day when most monthly leads are open and a
# week boundary is near, so scheduled runs owe more than one period per duty:
# a Sunday two days before a month begins, as 2026-11-29 was. Its week of
# daily runs after it ends before today's date: a run at a clock later than
# the wall clock keeps no account (docs/contract.md#account), so a week
# reaching past it would not be the week the schedule runs.
CLOCK: Final = datetime(2026, 8, 30, 1, 0, tzinfo=UTC)
# Thirteen whole months, August 2025 to August 2026 (the clock's month).
BACKFILL_FROM: Final = date(2025, 8, 1)
BACKFILL_TO: Final = date(2026, 8, 30)


def draw(salt: int, modulus: int, column: str = "n") -> sql.Composable:
    """A deterministic pseudo-random integer in ``[0, modulus)`` from a row's column.

    Each salt is an independent hash of the row number.
    """
    return sql.SQL("mod(hashint8extended({}::bigint, {}) & 2147483647, {})::int").format(
        sql.Identifier(column), sql.Literal(salt), sql.Literal(modulus)
    )


def weighted(draw_column: str, choices: Sequence[Choice]) -> sql.Composable:
    """A CASE picking each choice with its permille weight from a draw in [0, 1000)."""
    if sum(weight for _, weight in choices) != 1000:
        raise BenchError(f"weights of {choices!r} sum to {sum(w for _, w in choices)}, not 1000")
    whens: list[sql.Composable] = []
    bound = 0
    for value, weight in choices[:-1]:
        bound += weight
        whens.append(
            sql.SQL("WHEN {} < {} THEN {}").format(
                sql.Identifier(draw_column), sql.Literal(bound), _value(value)
            )
        )
    return sql.SQL("CASE {} ELSE {} END").format(sql.SQL(" ").join(whens), _value(choices[-1][0]))


def _value(value: str | int | Tail | None) -> sql.Composable:
    if isinstance(value, Tail):
        return sql.Identifier(value.column)
    return sql.Literal(value)


def _generate_query(duties: int, big_org_duties: int, mix: Mix) -> sql.Composed:
    """One ``INSERT … SELECT generate_series`` writing every duty server-side."""
    width = max(7, len(str(duties - 1)))
    draws = {
        "r_form": (2, 1000), "r_frequency": (3, 1000), "r_anchor": (4, 1000),
        "r_offset": (5, 1000), "any_offset": (6, 39), "r_lead": (7, 1000), "any_lead": (8, 31),
        "r_zone": (9, 1000), "any_zone": (10, len(ZONES)), "r_from": (12, 1000),
        "from_days": (13, 1200), "r_to": (14, 1000), "to_days": (15, 900),
        "owner_no": (16, OWNERS_PER_ORG), "unit_no": (17, BUSINESS_UNITS_PER_ORG),
        "r_source": (18, 1000), "name_no": (19, len(NAMES)),
    }  # fmt: skip
    if mix.compliance is not None:
        draws |= {
            "r_months": (20, 1000), "r_after_days": (21, 1000), "any_after_days": (22, 31),
            "r_roll": (23, 1000), "calendar_no": (24, len(HOLIDAY_CALENDARS)),
            "r_grace": (25, 1000), "any_grace": (26, 31), "r_review": (27, 1000),
        }  # fmt: skip
    drawn = sql.SQL(", ").join(
        sql.SQL("{} AS {}").format(draw(salt, modulus), sql.Identifier(name))
        for name, (salt, modulus) in draws.items()
    )
    anchor = weighted("r_anchor", mix.anchors)
    start_offset = weighted("r_offset", mix.start_offsets)
    end_offset = weighted("r_offset", mix.end_offsets)
    offset_days: sql.Composable = sql.SQL(
        "CASE WHEN {} = 'period_start' THEN {} ELSE {} END"
    ).format(anchor, start_offset, end_offset)
    # Nothing more for the classic mix, so its SQL (and data) stay as measured.
    extra_shaped: sql.Composable = sql.SQL("")
    extra_columns: sql.Composable = sql.SQL("")
    if (compliance := mix.compliance) is not None:
        offset_days = sql.SQL(
            "CASE WHEN {anchor} = 'period_start' THEN {start}"
            " WHEN {anchor} = 'after_period_end' THEN {after} ELSE {end} END"
        ).format(
            anchor=anchor,
            start=start_offset,
            after=weighted("r_after_days", compliance.after_days),
            end=end_offset,
        )
        roll = weighted("r_roll", compliance.rolls)
        extra_shaped = sql.SQL(
            """,
                   CASE WHEN {anchor} = 'after_period_end' THEN {months} ELSE 0 END
                       AS due_offset_months,
                   {roll} AS due_roll,
                   CASE WHEN {roll} = 'none' THEN NULL
                        ELSE (%(calendars)s::text[])[1 + calendar_no] END AS holiday_calendar,
                   {grace} AS grace_days,
                   {review} AS review_status"""
        ).format(
            anchor=anchor,
            months=weighted("r_months", compliance.after_months),
            roll=roll,
            grace=weighted("r_grace", compliance.grace_days),
            review=weighted("r_review", compliance.review_statuses),
        )
        extra_columns = sql.SQL(
            ", due_offset_months, due_roll, holiday_calendar, grace_days, review_status"
        )
    return sql.SQL(
        """
        WITH base AS (
            -- Exactly M duties (those where floor(n * M / N) steps) belong to the big
            -- organisation; the rest are spread over the others by hash.
            SELECT n,
                   CASE WHEN (n + 1) * {m} / {n} > n * {m} / {n} THEN 0
                        ELSE 1 + {org_draw} END AS org_no
            FROM generate_series(0::bigint, {n} - 1) AS n
        ),
        drawn AS (
            SELECT n, 'org-' || lpad(org_no::text, 4, '0') AS org,
                   {home_zone} AS home_zone, {drawn}
            FROM base
        ),
        shaped AS (
            SELECT 'duty-' || lpad(n::text, {width}, '0') AS id,
                   org AS organization_id,
                   (%(names)s::text[])[1 + name_no] AS name,
                   {form} AS form,
                   {status} AS status,
                   org || '-u' || lpad(owner_no::text, 2, '0') AS owner_id,
                   CASE WHEN unit_no < 2 THEN NULL ELSE org || '-bu' || unit_no END
                       AS business_unit_id,
                   {source} AS source,
                   CASE WHEN {form} = 'one_off' THEN NULL ELSE {frequency} END AS frequency,
                   {anchor} AS due_anchor,
                   {offset_days} AS due_offset_days,
                   {lead} AS lead_days,
                   (%(zones)s::text[])[1 + CASE WHEN r_zone < {home_permille} THEN home_zone
                                                ELSE any_zone END] AS timezone,
                   CASE WHEN r_from < {from_permille} THEN DATE '2024-01-01' + from_days END
                       AS effective_from,
                   r_to, to_days{extra_shaped}
            FROM drawn
        )
        INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id,
                               business_unit_id, source, frequency, due_anchor,
                               due_offset_days, lead_days, timezone,
                               effective_from, effective_to{extra_columns})
        SELECT id, organization_id, name, form, status, owner_id, business_unit_id, source,
               frequency, due_anchor, due_offset_days, lead_days, timezone, effective_from,
               CASE WHEN r_to < {to_permille}
                    THEN greatest(effective_from, DATE '2025-06-01') + to_days END
               {extra_columns}
        FROM shaped
        """
    ).format(
        n=sql.Literal(duties),
        m=sql.Literal(big_org_duties),
        org_draw=draw(1, ORGANISATIONS - 1),
        home_zone=draw(11, len(ZONES), "org_no"),
        drawn=drawn,
        width=sql.Literal(width),
        form=weighted("r_form", mix.forms),
        status=weighted("r_form", mix.statuses),
        source=weighted("r_source", mix.sources),
        frequency=weighted("r_frequency", mix.frequencies),
        anchor=anchor,
        offset_days=offset_days,
        extra_shaped=extra_shaped,
        extra_columns=extra_columns,
        lead=weighted("r_lead", mix.leads),
        home_permille=sql.Literal(HOME_ZONE_PERMILLE),
        from_permille=sql.Literal(mix.effective_from_permille),
        to_permille=sql.Literal(mix.effective_to_permille),
    )


# Which duties a run dispatches (plan.is_dispatchable, the partial index).
_DISPATCHABLE: Final = "status = 'active' AND form = 'recurring' AND review_status = 'approved'"


@dataclass(frozen=True, slots=True)
class DataSummary:
    """What was generated, as counted back from the database."""

    mix: str
    duties: int
    dispatchable: int
    organisations: int
    owners: int
    # (frequency, zone, anchor, offsets, roll, calendar, lead) among the
    # dispatchable, as issue 5 counts a cadence, and without the lead, which
    # only decides when a period becomes visible.
    cadences: int
    cadences_without_lead: int
    big_org_duties: int
    with_effective_window: int
    # The compliance columns (all zero in the classic mix).
    after_period_end: int
    rolled: int
    with_grace: int
    held_for_review: int  # active recurring duties the review gate holds back
    seconds: float


def write_duties(conn: Conn, duties: int, big_org_duties: int, mix: Mix) -> None:
    """Write ``duties`` duties of ``mix`` server-side, in one statement, and nothing else.

    No VACUUM, no ANALYZE: ``generate`` adds them; a test of plans made on
    tables never analysed (tests/db/test_plans_unanalysed.py) leaves them out.
    """
    conn.execute(
        _generate_query(duties, big_org_duties, mix),
        {"names": list(NAMES), "zones": list(ZONES), "calendars": list(HOLIDAY_CALENDARS)},
    )


def generate(conn: Conn, duties: int, big_org_duties: int, mix: Mix) -> DataSummary:
    """Write ``duties`` duties server-side, analyse them, and count what was made."""
    started = time.perf_counter()
    write_duties(conn, duties, big_org_duties, mix)
    for table in DISPATCH_TABLES:
        # A background vacuum of one table landing inside another phase's
        # timing would be noise on one side of a ratio only.
        for leaf in leaves(conn, table):
            conn.execute(
                sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(
                    sql.Identifier(leaf)
                )
            )
    # Vacuumed and analysed, as a long-lived production table would be.
    conn.execute("VACUUM (ANALYZE) duly_duty")
    conn.execute("VACUUM (ANALYZE) duly_task")
    seconds = time.perf_counter() - started
    row = conn.execute(
        sql.SQL(
            """
            SELECT count(*),
                   count(*) FILTER (WHERE {dispatchable}),
                   count(DISTINCT organization_id),
                   count(DISTINCT owner_id),
                   count(*) FILTER (WHERE organization_id = %s),
                   count(*) FILTER (WHERE effective_from IS NOT NULL
                                       OR effective_to IS NOT NULL),
                   count(*) FILTER (WHERE due_anchor = 'after_period_end'),
                   count(*) FILTER (WHERE due_roll <> 'none'),
                   count(*) FILTER (WHERE grace_days > 0),
                   count(*) FILTER (WHERE status = 'active' AND form = 'recurring'
                                      AND review_status IS DISTINCT FROM 'approved')
            FROM duly_duty
            """
        ).format(dispatchable=sql.SQL(_DISPATCHABLE)),
        (BIG_ORG,),
    ).fetchone()
    cadences = conn.execute(
        sql.SQL(
            "SELECT count(DISTINCT (frequency, timezone, due_anchor, due_offset_months,"
            " due_offset_days, due_roll, holiday_calendar, lead_days)),"
            " count(DISTINCT (frequency, timezone, due_anchor, due_offset_months,"
            " due_offset_days, due_roll, holiday_calendar))"
            " FROM duly_duty WHERE {dispatchable}"
        ).format(dispatchable=sql.SQL(_DISPATCHABLE))
    ).fetchone()
    if cadences is None:
        raise BenchError("no cadence counts from duly_duty")
    if row is None:
        raise BenchError("no counts from duly_duty")
    total, dispatchable, organisations, owners, big, windowed, after, rolled, grace, held = (
        int(v) for v in row
    )
    return DataSummary(
        mix=mix.name,
        duties=total,
        dispatchable=dispatchable,
        organisations=organisations,
        owners=owners,
        cadences=int(cadences[0]),
        cadences_without_lead=int(cadences[1]),
        big_org_duties=big,
        with_effective_window=windowed,
        after_period_end=after,
        rolled=rolled,
        with_grace=grace,
        held_for_review=held,
        seconds=seconds,
    )

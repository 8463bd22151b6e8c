"""The data layer: what the dispatcher reads from and writes to PostgreSQL.

Every statement is composed from the fixed fragments in this module; values
always travel as bound parameters, never in the SQL text. Sets travel as
arrays (``unnest``), never as temporary tables, so a run works unchanged
through RDS Proxy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import sql

from dispatch_fn.plan import Schedule

type Connection = psycopg.Connection[tuple[Any, ...]]

# Only these duties are ever dispatched; the partial index duly_duty_dispatchable
# holds exactly them, so a page is an index range scan.
_DISPATCHABLE: Final = "d.status = 'active' AND d.form = 'recurring'"

# Null cadence columns read as their column defaults (SPEC §4), the same
# defaults plan.Cadence.of applies.
_CADENCE_COLUMNS: Final = """
    d.frequency,
    coalesce(d.timezone, 'UTC') AS timezone,
    coalesce(d.due_anchor, 'period_start') AS due_anchor,
    coalesce(d.due_offset_days, 0) AS due_offset_days,
    coalesce(d.lead_days, 7) AS lead_days"""


@dataclass(frozen=True, slots=True)
class Scope:
    """Limits a run to one organisation and/or a list of duties."""

    organization_id: str | None = None
    duty_ids: tuple[str, ...] | None = None

    def condition(self) -> sql.Composable:
        """The scope as a ``WHERE`` conjunct over ``duly_duty d`` (see ``params``)."""
        parts: list[sql.Composable] = [sql.SQL("true")]
        if self.organization_id is not None:
            parts.append(sql.SQL("d.organization_id = %(organization_id)s"))
        if self.duty_ids is not None:
            parts.append(sql.SQL("d.id = ANY(%(duty_ids)s)"))
        return sql.SQL(" AND ").join(parts)

    def params(self) -> dict[str, Any]:
        """The values ``condition`` refers to."""
        return {"organization_id": self.organization_id, "duty_ids": list(self.duty_ids or ())}


@dataclass(frozen=True, slots=True)
class Group:
    """Dispatchable duties of one frequency, zone and anchor: how many, and their largest lead."""

    frequency: str | None
    timezone: str
    due_anchor: str
    duties: int
    max_lead: int


@dataclass(frozen=True, slots=True)
class PageResult:
    """What the database reported for one page: its last id (None if it was empty) and counts."""

    upto: str | None
    rows: int
    duties: int
    outside_window: int
    nothing_due: int
    owed: int
    created: int
    advanced: int


def count_by_form_and_status(conn: Connection, scope: Scope) -> list[tuple[Any, Any, int]]:
    """``(form, status, count)`` for every duty in scope that is not dispatchable."""
    query = sql.SQL(
        "SELECT d.form, d.status, count(*) FROM duly_duty d"
        " WHERE NOT coalesce(" + _DISPATCHABLE + ", false) AND {scope}"
        " GROUP BY d.form, d.status"
    ).format(scope=scope.condition())
    rows = conn.execute(query, scope.params()).fetchall()
    return [(form, status, int(n)) for form, status, n in rows]


def ids_with_form(
    conn: Connection, scope: Scope, forms_excluded: Sequence[str], limit: int
) -> list[tuple[str, Any]]:
    """``(id, form)`` of up to ``limit`` duties in scope whose form is none of these."""
    query = sql.SQL(
        "SELECT d.id, d.form FROM duly_duty d"
        " WHERE (d.form IS NULL OR d.form <> ALL(%(forms)s)) AND {scope}"
        " ORDER BY d.id LIMIT %(limit)s"
    ).format(scope=scope.condition())
    params = {**scope.params(), "forms": list(forms_excluded), "limit": limit}
    return [(str(duty_id), form) for duty_id, form in conn.execute(query, params).fetchall()]


def dispatchable_groups(conn: Connection, scope: Scope) -> list[Group]:
    """Every frequency, zone and anchor among the dispatchable duties in scope.

    One aggregate over the duties, once per run: its size is bounded by the
    cadences in use, not by the number of duties.
    """
    query = sql.SQL(
        "SELECT frequency, timezone, due_anchor, count(*), max(lead_days) FROM ("
        " SELECT " + _CADENCE_COLUMNS + " FROM duly_duty d"
        " WHERE " + _DISPATCHABLE + " AND {scope}) duty"
        " GROUP BY 1, 2, 3"
    ).format(scope=scope.condition())
    rows = conn.execute(query, scope.params()).fetchall()
    return [
        Group(frequency, zone, anchor, int(count), int(max_lead))
        for frequency, zone, anchor, count, max_lead in rows
    ]


def page_bounds(conn: Connection, scope: Scope, size: int) -> list[str]:
    """The last id of every full page of ``size`` dispatchable duties in scope, in order.

    So that pages can be handed to several connections at once; the result
    grows with N / size, not with N.
    """

    # Each step skips one page along the index from the previous bound: one
    # pass over the index in all, a third of the time numbering every row
    # with row_number() took (108 vs 307 ms at 900,000 dispatchable duties).
    def step(after: str) -> sql.Composed:
        return sql.SQL(
            "SELECT d.id FROM duly_duty d WHERE "
            + _DISPATCHABLE
            + " AND {scope} AND "
            + after
            + " ORDER BY d.id OFFSET %(skip)s LIMIT 1"
        ).format(scope=scope.condition())

    query = sql.SQL(
        "WITH RECURSIVE bound(id) AS ( SELECT ({first}) UNION ALL SELECT ({next})"
        " FROM bound WHERE bound.id IS NOT NULL)"
        " SELECT id FROM bound WHERE id IS NOT NULL ORDER BY id"
    ).format(first=step("true"), next=step("d.id > bound.id"))
    params = {**scope.params(), "skip": size - 1}
    return [str(row[0]) for row in conn.execute(query, params)]


def ids_in_group(conn: Connection, scope: Scope, group: Group, limit: int) -> list[str]:
    """Ids of up to ``limit`` dispatchable duties in scope that belong to ``group``."""
    query = sql.SQL(
        "SELECT id FROM (SELECT d.id," + _CADENCE_COLUMNS + " FROM duly_duty d"
        " WHERE " + _DISPATCHABLE + " AND {scope}) duty"
        " WHERE frequency IS NOT DISTINCT FROM %(frequency)s::text AND timezone = %(timezone)s"
        " AND due_anchor = %(anchor)s"
        " ORDER BY id LIMIT %(limit)s"
    ).format(scope=scope.condition())
    params = {
        **scope.params(),
        "frequency": group.frequency,
        "timezone": group.timezone,
        "anchor": group.due_anchor,
        "limit": limit,
    }
    return [str(row[0]) for row in conn.execute(query, params).fetchall()]


def _unnest(*arrays: tuple[str, str]) -> str:
    # Each array is read through a scalar subquery, so the planner sizes it as
    # a small set of unknown length instead of counting its elements: it then
    # hashes the schedules and streams the page through the hash, where knowing
    # the sizes it would sort the whole page on three text columns for a merge
    # join. Measured at 1,000,000 duties (lab, custom plans): no-op run
    # 11.2 s with the sorts, 8.6-8.9 s hashed.
    return "unnest(" + ", ".join(f"(SELECT %({name})b::{kind}[])" for name, kind in arrays) + ")"


# The owed rows of the next keyset page: each dispatchable duty joined to its
# schedule's candidate periods, its due date clamped into each, clipped by its
# own effective window and lead. Both the writing and the dry-run statements
# start here. Duties whose group was refused have no schedule, so they join
# nothing and are not counted here (the run counted them as faults).
_OWED: Final = (
    """
WITH page AS (
    SELECT d.id, d.organization_id, d.owner_id, d.business_unit_id, d.name, d.source,
           d.effective_from, d.effective_to,"""
    + _CADENCE_COLUMNS
    + """
    FROM duly_duty d
    WHERE """
    + _DISPATCHABLE
    + """ AND {bounds} AND {scope} AND d.id <> ALL(%(excluded)s::text[])
    ORDER BY d.id
    LIMIT %(size)s
),
cadence AS (
    SELECT * FROM """
    + _unnest(
        ("c_schedule", "int"),
        ("c_frequency", "text"),
        ("c_timezone", "text"),
        ("c_anchor", "text"),
        ("c_today", "date"),
    )
    + """
        AS c(schedule_no, frequency, timezone, due_anchor, today)
),
period AS (
    SELECT * FROM """
    + _unnest(
        ("p_schedule", "int"),
        ("p_key", "text"),
        ("p_first", "date"),
        ("p_last", "date"),
        ("p_current", "bool"),
    )
    + """
        AS p(schedule_no, period_key, first_day, last_day, current)
),
placed AS (
    -- Every duty of the page; those whose group was refused (no schedule)
    -- keep a null schedule_no, count towards the cursor and nothing else.
    SELECT page.*, c.schedule_no, c.today,
           (c.today IS NULL OR c.today BETWEEN coalesce(page.effective_from, '-infinity'::date)
                                           AND coalesce(page.effective_to, 'infinity'::date))
               AS in_window
    FROM page
    LEFT JOIN cadence c
      ON (c.frequency, c.timezone, c.due_anchor)
       = (page.frequency COLLATE "C", page.timezone COLLATE "C", page.due_anchor COLLATE "C")
),
dated AS (
    -- periods.due_date_for in bulk: the anchor day plus the offset, clamped
    -- into the period (the offset is clamped first, so no offset can push a
    -- date out of range: no period is longer than 366 days).
    SELECT pl.*, p.period_key, p.current,
           least(greatest(
               CASE pl.due_anchor WHEN 'period_start' THEN p.first_day ELSE p.last_day END
                   + least(greatest(pl.due_offset_days, -400), 400),
               p.first_day), p.last_day) AS due_date
    FROM placed pl
    JOIN period p USING (schedule_no)
    WHERE pl.schedule_no IS NOT NULL AND pl.in_window
      -- A later period can only be owed if it starts by today + lead (its due
      -- date lies inside it); skip the others before computing anything.
      AND (pl.today IS NULL OR p.current OR p.first_day <= pl.today + pl.lead_days)
    -- A fence: flattened into owed, the due date would be computed once per
    -- use (three times per candidate period).
    OFFSET 0
),
owed AS (
    SELECT organization_id, id AS duty_id, owner_id, business_unit_id, name AS subject, source,
           period_key, due_date, due_date - lead_days AS visible_from
    FROM dated
    WHERE due_date BETWEEN coalesce(effective_from, '-infinity'::date)
                       AND coalesce(effective_to, 'infinity'::date)
      -- plan.is_owed: the current period always; a later one once visible.
      AND (today IS NULL OR current OR due_date - lead_days <= today)
)"""
)

# Per duty, the greatest key among ``rows``, and the never-regress test
# against what the duty holds. Keys compare in "C" collation: fixed-width
# ASCII, where byte order is chronological order whatever the database's
# collation says.
_LATEST_OF: Final = """(SELECT duty_id, max(period_key COLLATE "C") AS latest
          FROM {rows} GROUP BY duty_id) i"""
_MOVES_FORWARD: Final = """d.id = i.duty_id
      AND (d.last_dispatched_period IS NULL
           OR d.last_dispatched_period COLLATE "C" < i.latest)"""


def _summary(new_rows: str, advanced_duties: str) -> str:
    # One row, in PageResult's order; each CTE is scanned once. max(id) is
    # taken in the database's own collation, the one the page's ORDER BY used,
    # so it is the next cursor. nothing_due (in its window, yet owed nothing)
    # is counted by difference: an anti-join between two CTEs is planned
    # blind, as a nested loop. Its DISTINCT sorts the page's owed rows; in "C"
    # that is a byte comparison, where a linguistic default collation (such as
    # en_US.UTF-8) would call strcoll for each, for the same count.
    return f"""
SELECT d.upto, d.page_rows, d.duties, d.outside_window, d.in_window - o.owing, o.owed,
       (SELECT count(*) FROM {new_rows}),
       (SELECT count(*) FROM {advanced_duties})
FROM (SELECT max(id) AS upto,
             count(*) AS page_rows,
             count(schedule_no) AS duties,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND NOT in_window) AS outside_window,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND in_window) AS in_window
      FROM placed) d,
     (SELECT count(*) AS owed, count(DISTINCT duty_id COLLATE "C") AS owing FROM owed) o"""


# Rows go in sorted by the unique key, so two runs inserting overlapping sets
# wait on each other in one order instead of deadlocking. The never-regress
# comparison sits in the UPDATE's WHERE, which PostgreSQL re-checks against the
# newest row version if a concurrent run moved it first.
_WRITE: Final = (
    _OWED
    + """,
inserted AS (
    INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject, source,
                           period_key, due_date, visible_from)
    SELECT * FROM owed ORDER BY duty_id COLLATE "C", period_key COLLATE "C"
    ON CONFLICT ON CONSTRAINT duly_task_dispatch_identity DO NOTHING
    RETURNING duty_id, period_key
),
advanced AS (
    UPDATE duly_duty d SET last_dispatched_period = i.latest
    FROM """
    + _LATEST_OF.format(rows="inserted")
    + """
    WHERE """
    + _MOVES_FORWARD
    + """
    RETURNING d.id
)"""
    + _summary("inserted", "advanced")
)

# The same question without writing: which owed rows are not there yet, and
# which duties those would advance.
_DRY_RUN: Final = (
    _OWED
    + """,
missing AS (
    SELECT o.duty_id, o.period_key FROM owed o
    WHERE NOT EXISTS (
        SELECT 1 FROM duly_task t
        WHERE (t.organization_id, t.duty_id, t.owner_id, t.period_key)
            = (o.organization_id, o.duty_id, o.owner_id, o.period_key))
),
advancing AS (
    SELECT d.id FROM duly_duty d, """
    + _LATEST_OF.format(rows="missing")
    + """
    WHERE """
    + _MOVES_FORWARD
    + """
)"""
    + _summary("missing", "advancing")
)


@dataclass(frozen=True, slots=True)
class PageStatement:
    """One run's page statement, composed once: its SQL and the schedules it binds.

    Only the page's bounds and size change from page to page, so the text (one
    variant per kind of bounds) and the arrays are built once per run rather
    than once per page.
    """

    variants: dict[tuple[bool, bool], sql.Composed]
    params: dict[str, Any]


def page_statement(
    scope: Scope, ready: Sequence[tuple[Group, Schedule]], *, dry_run: bool
) -> PageStatement:
    """The statement that inserts (or, dry, counts) the owed tasks of one page."""
    template = sql.SQL(_DRY_RUN if dry_run else _WRITE)
    condition = scope.condition()
    lower = {False: sql.SQL("true"), True: sql.SQL("d.id > %(after)s")}
    upper = {False: sql.SQL("true"), True: sql.SQL("d.id <= %(upto)s")}
    return PageStatement(
        variants={
            (has_after, has_upto): template.format(
                bounds=sql.SQL(" AND ").join([lower[has_after], upper[has_upto]]),
                scope=condition,
            )
            for has_after in (False, True)
            for has_upto in (False, True)
        },
        params={**scope.params(), **_arrays(ready)},
    )


def dispatch_page(
    conn: Connection,
    statement: PageStatement,
    after: str | None,
    upto: str | None,
    size: int,
    *,
    excluded: Sequence[str] = (),
) -> PageResult:
    """Run ``statement`` on the first ``size`` duties in ``(after, upto]``: one transaction.

    A None bound is open. Duties in ``excluded`` (set aside by the run) are not
    part of the page.
    """
    query = statement.variants[after is not None, upto is not None]
    params = {
        **statement.params,
        "after": after,
        "upto": upto,
        "size": size,
        "excluded": list(excluded),
    }
    # Never prepared: a prepared statement would switch to a generic plan after
    # five pages, and that plan, guessing at the cursor and the page size,
    # measured slower (9.4 s vs 8.6-8.9 s no-op at 1,000,000 duties) than
    # planning each page afresh (under a millisecond a page). It also leaves
    # RDS Proxy and direct connections running the very same plan.
    row = conn.execute(query, params, prepare=False).fetchone()
    assert row is not None  # an aggregate-only SELECT always returns one row  # noqa: S101
    upto_seen, *counts = row
    return PageResult(None if upto_seen is None else str(upto_seen), *(int(n) for n in counts))


def _arrays(ready: Sequence[tuple[Group, Schedule]]) -> dict[str, list[Any]]:
    # Each schedule's periods travel once, however many anchors share it.
    numbers: dict[int, int] = {}
    arrays: dict[str, list[Any]] = {
        name: []
        for name in (
            "c_schedule", "c_frequency", "c_timezone", "c_anchor", "c_today",
            "p_schedule", "p_key", "p_first", "p_last", "p_current",
        )
    }  # fmt: skip
    for group, schedule in ready:
        number = numbers.get(id(schedule))
        if number is None:
            number = numbers[id(schedule)] = len(numbers)
            for period in schedule.periods:
                arrays["p_schedule"].append(number)
                arrays["p_key"].append(period.key)
                arrays["p_first"].append(period.first_day)
                arrays["p_last"].append(period.last_day)
                arrays["p_current"].append(period.current)
        arrays["c_schedule"].append(number)
        arrays["c_frequency"].append(group.frequency)
        arrays["c_timezone"].append(group.timezone)
        arrays["c_anchor"].append(group.due_anchor)
        arrays["c_today"].append(schedule.today)
    return arrays


def _range_query(select: str, scope: Scope, after: str | None, upto: str | None) -> sql.Composed:
    # The page CTE's own selection, for the questions the run asks about a
    # range it could not dispatch in one statement.
    return sql.SQL(
        select + " FROM duly_duty d WHERE " + _DISPATCHABLE + " AND {scope}"
        " AND (%(after)s::text IS NULL OR d.id > %(after)s)"
        " AND (%(upto)s::text IS NULL OR d.id <= %(upto)s)"
        " AND d.id <> ALL(%(excluded)s::text[])"
    ).format(scope=scope.condition())


def page_ids(
    conn: Connection,
    scope: Scope,
    after: str | None,
    upto: str | None,
    *,
    size: int,
    excluded: Sequence[str] = (),
) -> list[str]:
    """The ids ``dispatch_page`` would take for these arguments, in page order."""
    query = _range_query("SELECT d.id", scope, after, upto) + sql.SQL(
        " ORDER BY d.id LIMIT %(size)s"
    )
    params = {**scope.params(), "after": after, "upto": upto, "size": size}
    params["excluded"] = list(excluded)
    return [str(row[0]) for row in conn.execute(query, params).fetchall()]


def any_dispatchable(conn: Connection, scope: Scope, after: str | None, upto: str | None) -> bool:
    """Whether any dispatchable duty in scope lies in ``(after, upto]`` (None: open)."""
    query = sql.SQL("SELECT EXISTS ({})").format(_range_query("SELECT 1", scope, after, upto))
    params = {**scope.params(), "after": after, "upto": upto, "excluded": []}
    row = conn.execute(query, params).fetchone()
    return bool(row and row[0])


def locked_ids(conn: Connection, ids: Sequence[str]) -> list[str]:
    """Those of ``ids`` whose duty row another transaction holds locked against an update.

    ``FOR NO KEY UPDATE`` is the lock the page's UPDATE takes; ``SKIP LOCKED``
    answers without waiting. In autocommit the probe's own locks end with it.
    """
    free = {
        str(row[0])
        for row in conn.execute(
            "SELECT d.id FROM duly_duty d WHERE d.id = ANY(%(ids)s::text[])"
            " FOR NO KEY UPDATE SKIP LOCKED",
            {"ids": list(ids)},
        ).fetchall()
    }
    return [duty_id for duty_id in ids if duty_id not in free]

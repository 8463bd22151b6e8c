"""The data layer: what the dispatcher reads from and writes to PostgreSQL.

Every statement lives as a ``.sql`` file in ``statements/``, written as a
person would write it; this module fills only the slots each file declares
(the keyset bounds, the scope, which rows a summary counts) through
``psycopg.sql``. Values always travel as bound parameters, never in the SQL
text. Sets travel as arrays (``unnest``), never as temporary tables, so a run
works unchanged through RDS Proxy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Final

import psycopg
import psycopg.rows
from psycopg import sql
from psycopg.types.json import Jsonb

from dispatch_fn import _business_days, _calendar
from dispatch_fn._sql import Connection, statement_text
from dispatch_fn.plan import LEAD_THRESHOLDS, Schedule

# Re-exported: the data layer's callers have always found the scope here.
from dispatch_fn.request import Scope as Scope  # noqa: PLC0414

# The days a due date can land on beyond its period's last day before the
# roll: after_period_end allows 24 months and 366 days (periods.check_due_rule).
_AFTER_PERIOD_REACH: Final = timedelta(days=24 * 31 + 366)
_NO_WEIGHTS: Final = Jsonb({})


def _statement(name: str) -> sql.SQL:
    return sql.SQL(statement_text(name))


def scope_condition(scope: Scope) -> sql.Composable:
    """The scope as a ``WHERE`` conjunct over ``duly_duty d`` (see ``scope_params``)."""
    parts: list[sql.Composable] = [sql.SQL("true")]
    if scope.organization_id is not None:
        parts.append(sql.SQL("d.organization_id = %(organization_id)s"))
    if scope.duty_ids is not None:
        parts.append(sql.SQL("d.id = ANY(%(duty_ids)s)"))
    if scope.resume_after is not None:
        parts.append(sql.SQL("d.id > %(resume_after)s"))
    return sql.SQL(" AND ").join(parts)


def scope_params(scope: Scope) -> dict[str, Any]:
    """The values ``scope_condition`` refers to."""
    return {
        "organization_id": scope.organization_id,
        "duty_ids": list(scope.duty_ids or ()),
        "resume_after": scope.resume_after,
    }


@dataclass(frozen=True, slots=True)
class Group:
    """Dispatchable duties of one frequency, zone and lead bucket: how many, their largest lead.

    The run plans one schedule per group. Anchors, rolls and calendars do not
    change a schedule, so they are not part of the key: the number of groups
    stays bounded by the frequencies and zones in use (docs/adr/0002). Leads
    do, so each group is planned for the leads it has: ``lead_bucket`` is
    ``plan.lead_bucket`` of each member's lead (docs/adr/0009).
    """

    frequency: str | None
    timezone: str
    lead_bucket: int
    duties: int
    max_lead: int


@dataclass(frozen=True, slots=True)
class DueRule:
    """Dispatchable duties sharing one anchor, roll and calendar, outside refused groups.

    With how many there are, and how many of them have offsets or a grace out
    of the range the engine allows.
    """

    due_anchor: str
    due_roll: str
    holiday_calendar: str | None
    duties: int
    out_of_range: int = 0


@dataclass(frozen=True, slots=True)
class Rules:
    """The due rules in use, as the run judged them: those it dispatches and those it refused."""

    accepted: tuple[DueRule, ...] = ()
    refused: tuple[DueRule, ...] = ()


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
    cut: bool = False  # the page's row budget ended it before its size did


def count_undispatchable(conn: Connection, scope: Scope) -> list[tuple[Any, Any, Any, int]]:
    """``(form, status, review_status, count)`` for every duty in scope not dispatched."""
    query = _statement("undispatchable_counts").format(scope=scope_condition(scope))
    rows = conn.execute(query, scope_params(scope)).fetchall()
    return [(form, status, review, int(n)) for form, status, review, n in rows]


def ids_with_form(
    conn: Connection, scope: Scope, forms_excluded: Sequence[str], limit: int
) -> list[tuple[str, Any]]:
    """``(id, form)`` of up to ``limit`` duties in scope whose form is none of these."""
    query = _statement("unknown_form_ids").format(scope=scope_condition(scope))
    params = {**scope_params(scope), "forms": list(forms_excluded), "limit": limit}
    return [(str(duty_id), form) for duty_id, form in conn.execute(query, params).fetchall()]


def dispatchable_groups(conn: Connection, scope: Scope) -> list[Group]:
    """Every group of dispatchable duties in scope (one aggregate per run)."""
    query = _statement("dispatchable_groups").format(scope=scope_condition(scope))
    rows = conn.execute(query, {**scope_params(scope), **_lead_thresholds()}).fetchall()
    return [
        Group(frequency, zone, int(bucket), int(count), int(lead))
        for frequency, zone, bucket, count, lead in rows
    ]


def _lead_thresholds() -> dict[str, list[int]]:
    # plan.lead_bucket's rule, for the statements' width_bucket.
    return {"lead_thresholds": list(LEAD_THRESHOLDS)}


def due_rules(conn: Connection, scope: Scope, refused: Sequence[Group]) -> list[DueRule]:
    """Every due rule among the dispatchable duties in scope outside the ``refused`` groups."""
    query = _statement("due_rules").format(scope=scope_condition(scope))
    params = {**scope_params(scope), **_group_arrays(refused)}
    return [
        DueRule(anchor, roll, calendar, int(count), int(bad))
        for anchor, roll, calendar, count, bad in conn.execute(query, params)
    ]


def page_bounds(conn: Connection, scope: Scope, size: int) -> list[str]:
    """The last id of every full page of ``size`` dispatchable duties in scope, in order."""
    query = _statement("page_bounds").format(scope=scope_condition(scope))
    params = {**scope_params(scope), "skip": size - 1}
    return [str(row[0]) for row in conn.execute(query, params)]


def fault_members(
    conn: Connection, scope: Scope, refused: Sequence[Group], rules: Rules, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` duties counted as faults before the pages, as duty rows, in id order."""
    query = _statement("fault_members").format(scope=scope_condition(scope))
    params = {
        **scope_params(scope),
        **_group_arrays(refused),
        **_rule_arrays(rules.refused, "r"),
        "limit": limit,
    }
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(query, params).fetchall()


def _group_arrays(groups: Sequence[Group]) -> dict[str, list[Any]]:
    return {
        "g_frequency": [group.frequency for group in groups],
        "g_timezone": [group.timezone for group in groups],
        "g_lead_bucket": [group.lead_bucket for group in groups],
        **_lead_thresholds(),
    }


def _rule_arrays(rules: Sequence[DueRule], prefix: str) -> dict[str, list[Any]]:
    # '' stands for "no calendar" so that the comparison is a plain equality.
    return {
        f"{prefix}_anchor": [rule.due_anchor for rule in rules],
        f"{prefix}_roll": [rule.due_roll for rule in rules],
        f"{prefix}_calendar": [rule.holiday_calendar or "" for rule in rules],
    }


@dataclass(frozen=True, slots=True)
class PageStatement:
    """One run's page statement, composed once: its SQL and the schedules it binds.

    Only the page's bounds and size change from page to page, so the text (one
    variant per kind of bounds) and the arrays are built once per run rather
    than once per page. ``ids`` are the same page's ids alone (``page_ids``).
    """

    variants: dict[tuple[bool, bool], sql.Composed]
    params: dict[str, Any]
    ids: dict[tuple[bool, bool], sql.Composed]
    # A dry page is planned with seq scans off (page_dry_run_plan.sql says why).
    dry_run: bool = False
    # Each group's weight (page_owed.sql's weights), bound only where a page
    # is weighed: scheduled pages need not parse it.
    weights: Jsonb = _NO_WEIGHTS
    # The most rows one duty of the run can owe: its group's weight
    # (page_owed.sql's weights). Not how many such duties there are, which
    # a duty inserted during the run would make untrue.
    heaviest: int = 0

    def page_size(self, chunk_size: int, page_rows: int | None) -> int:
        """The duties a page of this statement takes: ``chunk_size``, or a little less.

        Fewer where, at no less than half the chunk, a page then stays within
        ``page_rows`` even if every duty in it is the heaviest: such pages go
        unweighed (``budget``), and weighing every page costs more than the
        few more pages do (docs/adr/0009).
        """
        if page_rows is None or not self.heaviest:
            return chunk_size
        fits = page_rows // self.heaviest
        return fits if max(1, chunk_size // 2) <= fits < chunk_size else chunk_size

    def budget(self, size: int, page_rows: int | None) -> int | None:
        """The row budget a page of ``size`` duties is held to; None: it cannot be reached.

        Where ``size`` of the run's heaviest duties stay within ``page_rows``
        the page is never cut, so it goes unweighed (page_owed.sql).
        """
        if page_rows is None or size * self.heaviest <= page_rows:
            return None
        return page_rows


def page_statement(
    scope: Scope, ready: Sequence[tuple[Group, Schedule]], rules: Rules, *, dry_run: bool
) -> PageStatement:
    """The statement that inserts (or, dry, counts) the owed tasks of one page.

    ``page_owed.sql``, then ``page_write.sql`` or ``page_dry_run.sql``, then
    ``page_summary.sql``: the files' text with their slots filled; and
    ``page_owed.sql`` then ``page_taken.sql`` for the page's ids.
    """
    new_rows, advanced_rows = ("missing", "advancing") if dry_run else ("inserted", "advanced")
    tail = "page_dry_run" if dry_run else "page_write"
    condition = scope_condition(scope)
    lower = {False: sql.SQL("true"), True: sql.SQL("d.id > %(after)s")}
    upper = {False: sql.SQL("true"), True: sql.SQL("d.id <= %(upto)s")}

    def variants(*names: str) -> dict[tuple[bool, bool], sql.Composed]:
        # The files are fixed text shipped in the package, never input.
        template = sql.SQL("\n".join(statement_text(name) for name in names))
        return {
            (has_after, has_upto): template.format(
                bounds=sql.SQL(" AND ").join([lower[has_after], upper[has_upto]]),
                scope=condition,
                new_rows=sql.Identifier(new_rows),
                advanced_rows=sql.Identifier(advanced_rows),
            )
            for has_after in (False, True)
            for has_upto in (False, True)
        }

    weights = _weights(ready)
    return PageStatement(
        variants=variants("page_owed", tail, "page_summary"),
        params={**scope_params(scope), **_lead_thresholds(), **_arrays(ready, rules)},
        weights=Jsonb(weights),
        ids=variants("page_owed", "page_taken"),
        dry_run=dry_run,
        heaviest=max(
            (w for zones in weights.values() for ws in zones.values() for w in ws.values()),
            default=0,
        ),
    )


def _weights(ready: Sequence[tuple[Group, Schedule]]) -> dict[str, dict[str, dict[str, int]]]:
    """Frequency, then zone, then lead bucket: the rows a duty of that group can owe.

    One per candidate period of its schedule, summed over a catch-up
    statement's clocks (one cadence each). A group without a frequency is
    refused, never planned.
    """
    weights: dict[str, dict[str, dict[str, int]]] = {}
    for group, schedule in ready:
        if group.frequency is None:
            continue
        buckets = weights.setdefault(group.frequency, {}).setdefault(group.timezone, {})
        bucket = str(group.lead_bucket)
        buckets[bucket] = buckets.get(bucket, 0) + len(schedule.periods)
    return weights


def dispatch_page(
    conn: Connection,
    statement: PageStatement,
    after: str | None,
    upto: str | None,
    size: int,
    *,
    page_rows: int | None = None,
    excluded: Sequence[str] = (),
    time_limit_ms: int | None = None,
) -> PageResult:
    """Run ``statement`` on the first ``size`` duties in ``(after, upto]``: one transaction.

    A None bound is open. The page ends early, after its first duty, where the
    rows its duties can owe would pass ``page_rows`` (None: no such bound).
    Duties in ``excluded`` (set aside by the run) are not part of the page.
    ``time_limit_ms`` lowers the statement timeout for this page alone.
    """
    query = statement.variants[after is not None, upto is not None]
    params = _page_params(statement, after, upto, size, page_rows, excluded)
    # Never prepared: a prepared statement would switch to a generic plan after
    # five pages, and that plan, guessing at the cursor and the page size,
    # measured slower than planning each page afresh (ADR 0002 has the
    # figures; `make bench` re-measures them). It also leaves
    # RDS Proxy and direct connections running the very same plan.
    settings: list[tuple[str, dict[str, Any]]] = []
    if statement.dry_run:
        settings.append(("page_dry_run_plan", {}))
    if time_limit_ms is not None:
        settings.append(("statement_time_limit", {"ms": max(time_limit_ms, 1)}))
    if not settings:
        # One statement in autocommit is one transaction: the page's inserts
        # and its advances commit together, with no BEGIN/COMMIT round trips.
        row = conn.execute(query, params, prepare=False).fetchone()
    else:
        # A transaction of the page's own, so that each SET LOCAL is the
        # page's alone and ends with it: the warm connection's next statement
        # is planned and timed as usual.
        with conn.transaction():
            for name, values in settings:
                conn.execute(_statement(name), values)
            row = conn.execute(query, params, prepare=False).fetchone()
    assert row is not None  # an aggregate-only query always returns one row  # noqa: S101
    upto_seen, *counts, cut = row
    rows, duties, outside, nothing_due, owed, created, advanced = (int(n) for n in counts)
    return PageResult(
        None if upto_seen is None else str(upto_seen),
        rows, duties, outside, nothing_due, owed, created, advanced, cut=bool(cut),
    )  # fmt: skip


def _page_params(  # noqa: PLR0917 - the page's arguments, passed on as they came
    statement: PageStatement,
    after: str | None,
    upto: str | None,
    size: int,
    page_rows: int | None,
    excluded: Sequence[str],
) -> dict[str, Any]:
    budget = statement.budget(size, page_rows)
    return {
        **statement.params,
        "after": after,
        "upto": upto,
        "size": size,
        "page_rows": budget,
        "weights": _NO_WEIGHTS if budget is None else statement.weights,
        "excluded": list(excluded),
    }


def _arrays(ready: Sequence[tuple[Group, Schedule]], rules: Rules) -> dict[str, list[Any]]:
    # Each schedule's periods travel once, however many groups share it: keyed
    # by value, as groups of one frequency whose zones share today's date (or,
    # in a backfill, every zone) plan equal schedules, and sending each copy
    # made the period arrays grow with the zones and lead buckets in use.
    numbers: dict[Schedule, int] = {}
    arrays: dict[str, list[Any]] = {
        name: []
        for name in (
            "c_schedule", "c_frequency", "c_timezone", "c_lead_bucket", "c_today", "c_threshold",
            "p_schedule", "p_key", "p_first", "p_last", "p_current", "p_past",
        )
    }  # fmt: skip
    for group, schedule in ready:
        number = numbers.get(schedule)
        if number is None:
            number = numbers[schedule] = len(numbers)
            for period in schedule.periods:
                arrays["p_schedule"].append(number)
                arrays["p_key"].append(period.key)
                arrays["p_first"].append(period.first_day)
                arrays["p_last"].append(period.last_day)
                arrays["p_current"].append(period.current)
                arrays["p_past"].append(period.past)
        arrays["c_schedule"].append(number)
        arrays["c_frequency"].append(group.frequency)
        arrays["c_timezone"].append(group.timezone)
        arrays["c_lead_bucket"].append(group.lead_bucket)
        arrays["c_today"].append(schedule.today)
        arrays["c_threshold"].append(schedule.threshold)
    days = (arrays["p_first"], arrays["p_last"])
    return {**arrays, **_rule_arrays(rules.refused, "x"), **_roll_arrays(days, rules.accepted)}


def _roll_arrays(
    days: tuple[Sequence[date], Sequence[date]], rules: Sequence[DueRule]
) -> dict[str, list[Any]]:
    """Every non-business day a rolled due date of this run can land on, per calendar.

    With the business days either side, so the page statement rolls by a
    lookup: the roll itself is decided here, by the engine's calendar. A rule
    is not tied to a group, so each rolled calendar covers every schedule's
    periods (a few thousand days at most): ``days`` are their first and last
    days, as ``_arrays`` sends them.
    """
    first_days, last_days = days
    if not first_days:
        return {"r_calendar": [], "r_day": [], "r_following": [], "r_preceding": []}
    first = min(first_days)
    last = max(last_days)
    spans: dict[str | None, tuple[date, date]] = {}
    for rule in rules:
        if rule.due_roll == "none":
            continue
        reach = last
        if rule.due_anchor == "after_period_end":
            # In ordinals: within the reach of 9999-12-31 the sum is no date.
            ordinal = last.toordinal() + _AFTER_PERIOD_REACH.days
            reach = date.fromordinal(min(ordinal, _calendar.LAST_DAY.toordinal()))
        low, high = spans.get(rule.holiday_calendar, (first, reach))
        spans[rule.holiday_calendar] = (low, max(high, reach))
    arrays: dict[str, list[Any]] = {
        "r_calendar": [],
        "r_day": [],
        "r_following": [],
        "r_preceding": [],
    }
    for code, (low, high) in spans.items():
        business = _business_days.business_calendar(code)
        for ordinal in range(low.toordinal(), high.toordinal() + 1):
            day = date.fromordinal(ordinal)
            if business.is_business_day(day):
                continue
            arrays["r_calendar"].append(code or "")
            arrays["r_day"].append(day)
            arrays["r_following"].append(_nearest(business, day, 1))
            arrays["r_preceding"].append(_nearest(business, day, -1))
    return arrays


def _nearest(business: _business_days.BusinessCalendar, day: date, step: int) -> date | None:
    # Past the calendar's edge there is no business day; the planner refuses
    # such a duty, and a null due date here owes nothing either.
    try:
        return business.next_business_day(day, step)
    except ValueError:
        return None


def page_ids(
    conn: Connection,
    statement: PageStatement,
    after: str | None,
    upto: str | None,
    size: int,
    *,
    page_rows: int | None = None,
    excluded: Sequence[str] = (),
) -> list[str]:
    """The ids ``dispatch_page`` would take for these arguments, in page order."""
    query = statement.ids[after is not None, upto is not None]
    params = _page_params(statement, after, upto, size, page_rows, excluded)
    return [str(row[0]) for row in conn.execute(query, params, prepare=False).fetchall()]


def page_duties(
    conn: Connection,
    scope: Scope,
    after: str | None,
    upto: str | None,
    *,
    size: int,
    excluded: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The ``duly_duty`` rows of the first ``size`` duties in ``(after, upto]``, in page order.

    Those ``dispatch_page`` takes before its row budget cuts the page.
    """
    query = _statement("page_ids").format(scope=scope_condition(scope))
    params = {
        **scope_params(scope),
        "after": after,
        "upto": upto,
        "size": size,
        "excluded": list(excluded),
    }
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        return list(cursor.execute(query, params).fetchall())


def any_dispatchable(conn: Connection, scope: Scope, after: str | None, upto: str | None) -> bool:
    """Whether any dispatchable duty in scope lies in ``(after, upto]`` (None: open)."""
    query = _statement("any_dispatchable").format(scope=scope_condition(scope))
    row = conn.execute(query, {**scope_params(scope), "after": after, "upto": upto}).fetchone()
    return bool(row and row[0])


def locked_ids(conn: Connection, ids: Sequence[str]) -> list[str]:
    """Those of ``ids`` whose duty row another transaction holds locked against an update."""
    free = {str(row[0]) for row in conn.execute(_statement("unlocked_ids"), {"ids": list(ids)})}
    return [duty_id for duty_id in ids if duty_id not in free]

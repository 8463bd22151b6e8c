"""The data layer: what the dispatcher reads from and writes to PostgreSQL.

Every statement is one whole ``.sql`` file in ``statements/``, written as a
person would write it and run as it is: this module maps the run's values
(its scope, the page's bounds, the planner's schedules and decisions) onto
the files' bound parameters, and maps the rows back. It decides nothing:
the roll table, the weights and the page sizes are the planner's
(``page_plan``). Sets travel as arrays (``unnest``), never as temporary
tables, so a run works unchanged through RDS Proxy.

A statement that binds a scope or a page's bounds runs unprepared: planned
with its values, each null test on them (``duly_in_scope``, an open bound)
folds away and leaves the comparison the partial index serves, where a
generic plan would keep the test and scan the whole index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import date
from typing import Any, Final

import psycopg
import psycopg.rows
from psycopg.types.json import Jsonb

from dispatch_fn.db._encoded import encode
from dispatch_fn.db.sql import Connection, named_row, named_rows, statement
from dispatch_fn.planning import LEAD_THRESHOLDS, Account, Schedule, Scope, page_plan

_NO_WEIGHTS: Final = Jsonb({})


def scope_params(scope: Scope) -> dict[str, Any]:
    """The scope's limits, as the statements bind them to ``duly_in_scope``; None: no limit."""
    # duly_afresh (migration 0022): by id alone, or by duly_duty_key; each with
    # the clock of the judgement it owes (page_afresh_owed.sql).
    listed = list(zip(scope.afresh.keys, scope.afresh.clocks, strict=True))
    by_id = [(duty_id, clock) for (organization, duty_id), clock in listed if organization is None]
    by_key = [
        (_duty_key(organization, duty_id), clock)
        for (organization, duty_id), clock in listed
        if organization is not None
    ]
    return {
        "organization_id": scope.organization_id,
        "duty_ids": None if scope.duty_ids is None else list(scope.duty_ids),
        "resume_after": scope.resume_after,
        "owed_at": scope.owed_at,
        "reach": scope.reach,
        "afresh_ids": [duty_id for duty_id, _ in by_id],
        "afresh_id_clocks": [clock for _, clock in by_id],
        "afresh_keys": [key for key, _ in by_key],
        "afresh_key_clocks": [clock for _, clock in by_key],
    }


def _duty_key(organization_id: str, duty_id: str) -> str:
    """A duty's organisation and id as one text, as migration 0022's duly_duty_key spells it."""
    return f"{len(organization_id)}:{organization_id}{duty_id}"


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
    """Dispatchable duties sharing one anchor, roll and calendar.

    ``due_rules`` counts those outside refused groups; ``census``, all of
    them. With how many there are, and how many of them have offsets or a grace out
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
class LapseProbe:
    """A duty a page flagged (page_owed.sql's ``lapse_probe``): its key, and its account as read.

    ``origin``: the day the run's schedule owes a duty with no account from.
    """

    organization_id: str
    duty_id: str
    account: Account
    origin: date | None

    @classmethod
    def of(cls, probe: Mapping[str, Any]) -> LapseProbe:
        """A probe from its JSON object, read by name."""
        spans = probe["owed_between"] or ()
        return cls(
            str(probe["organization_id"]),
            str(probe["id"]),
            Account(
                _day(probe["through"]),
                _day(probe["paused_on"]),
                _day(probe["changed_on"]),
                tuple((date.fromisoformat(first), _day(end)) for first, end in spans),
            ),
            _day(probe["origin"]),
        )


def _day(text: str | None) -> date | None:
    return None if text is None else date.fromisoformat(text)


@dataclass(frozen=True, slots=True, kw_only=True)
class PageResult:
    """The page statements' one row, field by column name: the page's last id, cut, and counts.

    Every field but ``upto``, ``cut`` and the two lists is a count the run
    adds up over its pages (``counts``): a counter the page statements gain
    is a column of theirs and a field here, of the same name.
    """

    upto: str | None  # the page's last id; None if it was empty
    cut: bool = False  # the page's row budget ended it before its size did
    rows: int = 0  # candidate rows
    duties: int = 0
    outside_window: int = 0
    nothing_due: int = 0
    owed: int = 0
    created: int = 0
    advanced: int = 0
    # Duties with periods over and owed before the catch-up horizon: counted,
    # never created (docs/contract.md#account).
    lapsed: int = 0
    # Duties whose account the page moved on.
    kept: int = 0
    # Duties that changed while periods were owed (docs/contract.md#account).
    changed: int = 0
    # The duties whose periods older than the first candidate may have lapsed
    # unseen, with their accounts as the page read them (the run judges them).
    lapse_probes: tuple[LapseProbe, ...] = ()
    # (organization_id, id) of the duties the page did not judge: faults the
    # run counted before its pages, or duties edited since it planned into
    # values it did not plan for.
    unplaced: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> PageResult:
        """The page statements' one row, read by column name."""
        upto = row["upto"]
        counts = {name: int(row[name]) for name in PAGE_COUNTS}
        return cls(
            upto=None if upto is None else str(upto),
            cut=bool(row["cut"]),
            lapse_probes=tuple(LapseProbe.of(json.loads(each)) for each in row["lapse_probes"]),
            unplaced=tuple((str(organization), str(id_)) for organization, id_ in row["unplaced"]),
            **counts,
        )

    def counts(self) -> dict[str, int]:
        """The page's counts by name: every field but ``upto``, ``cut`` and the lists."""
        return {name: getattr(self, name) for name in PAGE_COUNTS}


# The fields of PageResult that are counts, in order.
PAGE_COUNTS: Final = tuple(
    each.name
    for each in fields(PageResult)
    if each.name not in {"upto", "cut", "lapse_probes", "unplaced"}
)


@dataclass(frozen=True, slots=True)
class DutyForm:
    """A duty in scope and its form, as stored."""

    organization_id: str
    duty_id: str
    form: Any


def ids_with_form(conn: Connection, scope: Scope, forms_excluded: Sequence[str]) -> list[DutyForm]:
    """Every duty in scope whose form is none of these."""
    query = statement("unknown_form_ids")
    params = {**scope_params(scope), "forms": list(forms_excluded)}
    found = conn.execute(query, params, prepare=False)
    return [
        DutyForm(
            organization_id=str(row["organization_id"]), duty_id=str(row["id"]), form=row["form"]
        )
        for row in named_rows(found)
    ]


@dataclass(frozen=True, slots=True)
class NotDispatched:
    """How many duties in scope of one form, status and review the run does not dispatch."""

    form: Any
    status: Any
    review_status: Any
    duties: int

    @classmethod
    def of(cls, row: Mapping[str, Any], count: str) -> NotDispatched:
        """From a statement's row, its count in the column ``count``."""
        return cls(
            form=row["form"],
            status=row["status"],
            review_status=row["review_status"],
            duties=int(row[count]),
        )


@dataclass(frozen=True, slots=True)
class Census:
    """What one scan of the duties in scope says before the pages (duty_census.sql)."""

    # Every combination of form, status and review not dispatched.
    undispatchable: tuple[NotDispatched, ...]
    # Every group of dispatchable duties: the run plans one schedule each.
    groups: tuple[Group, ...]
    # Every due rule among the dispatchable duties, whatever their group: the
    # run's rules while it refuses no group (otherwise ``due_rules``).
    rules: tuple[DueRule, ...]


def census(conn: Connection, scope: Scope) -> Census:
    """The duties in scope not dispatched, the groups and the due rules of the rest, in one scan."""
    query = statement("duty_census")
    params = {**scope_params(scope), **_lead_thresholds()}
    undispatchable: list[NotDispatched] = []
    groups: list[Group] = []
    rules: list[DueRule] = []
    # A transaction (or, inside the caller's, a savepoint) of the census's
    # own, rolled back: the census only reads, and a rollback undoes its SET
    # LOCAL where a released savepoint would leave it to the caller.
    with conn.transaction(force_rollback=True):
        conn.execute(statement("census_plan"))
        rows = named_rows(conn.execute(query, params, prepare=False))
    for row in rows:
        if row["kind"] == "form":
            undispatchable.append(NotDispatched.of(row, "undispatchable"))
        elif row["kind"] == "group":
            groups.append(
                Group(
                    frequency=row["frequency"],
                    timezone=row["timezone"],
                    lead_bucket=int(row["lead_bucket"]),
                    duties=int(row["dispatchable"]),
                    max_lead=int(row["max_lead"]),
                )
            )
        else:
            rules.append(_due_rule(row, duties=row["dispatchable"]))
    if scope.owed_at is not None:
        # The census read only the duties owed; the rest of its 'form' set
        # comes from their index (duty_census_left_out.sql).
        left_out = conn.execute(statement("duty_census_left_out"), params, prepare=False)
        undispatchable.extend(NotDispatched.of(row, "duties") for row in named_rows(left_out))
    return Census(undispatchable=tuple(undispatchable), groups=tuple(groups), rules=tuple(rules))


def _lead_thresholds() -> dict[str, list[int]]:
    # plan.lead_bucket's rule, for the statements' width_bucket.
    return {"lead_thresholds": list(LEAD_THRESHOLDS)}


def estimated_duties(conn: Connection, scope: Scope) -> int:
    """The planner's estimate of how many duties ``scope`` holds, whatever their state.

    0 before the table's first ANALYZE: the planner has no statistics then.
    """
    analysed = named_row(conn.execute(statement("duty_analysed")))
    if analysed is None or not analysed["analysed"]:
        return 0
    query = statement("duty_estimate")
    row = named_row(conn.execute(query, scope_params(scope), prepare=False))
    assert row is not None  # noqa: S101 - EXPLAIN answers with one row
    plan = row["QUERY PLAN"]
    return round(float(plan[0]["Plan"]["Plan Rows"]))


def due_rules(conn: Connection, scope: Scope, refused: Sequence[Group]) -> list[DueRule]:
    """Every due rule among the dispatchable duties in scope outside the ``refused`` groups."""
    query = statement("due_rules")
    params = {**scope_params(scope), **_group_arrays(refused)}
    found = conn.execute(query, params, prepare=False)
    return [_due_rule(row, duties=row["duties"]) for row in named_rows(found)]


def _due_rule(row: Mapping[str, Any], *, duties: int) -> DueRule:
    """A due rule from its row: duty_census.sql's or due_rules.sql's, read by column name."""
    return DueRule(
        due_anchor=row["due_anchor"],
        due_roll=row["due_roll"],
        holiday_calendar=row["holiday_calendar"],
        duties=int(duties),
        out_of_range=int(row["out_of_range"]),
    )


def page_bounds(conn: Connection, scope: Scope, size: int) -> list[str]:
    """The last id of every full page of ``size`` dispatchable duties in scope, in order."""
    query = statement("page_bounds")
    params = {**scope_params(scope), "skip": size - 1}
    return [str(row["id"]) for row in named_rows(conn.execute(query, params, prepare=False))]


def fault_members(
    conn: Connection, scope: Scope, refused: Sequence[Group], rules: Rules
) -> list[dict[str, Any]]:
    """Every duty counted as a fault before the pages, as duty rows, in id order."""
    query = statement("fault_members")
    params = {**scope_params(scope), **_group_arrays(refused), **_rule_arrays(rules.refused, "r")}
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(query, params, prepare=False).fetchall()


def _group_arrays(groups: Sequence[Group]) -> dict[str, list[Any]]:
    return {
        "g_frequency": [group.frequency for group in groups],
        "g_timezone": [group.timezone for group in groups],
        "g_lead_bucket": [group.lead_bucket for group in groups],
        **_lead_thresholds(),
    }


def _rule_arrays(rules: Sequence[DueRule], prefix: str) -> dict[str, list[Any]]:
    # '' stands for "no calendar" so that the comparison is a plain equality;
    # no_calendar tells it from a calendar named '' where that matters.
    return {
        f"{prefix}_anchor": [rule.due_anchor for rule in rules],
        f"{prefix}_roll": [rule.due_roll for rule in rules],
        f"{prefix}_calendar": [rule.holiday_calendar or "" for rule in rules],
        f"{prefix}_no_calendar": [rule.holiday_calendar is None for rule in rules],
    }


@dataclass(frozen=True, slots=True)
class PageStatement:
    """One run's page statement: which file it runs and the schedules it binds.

    Only the page's bounds and size change from page to page, so the arrays
    are built, and dumped to their binary form (``db.encoded``), once per run
    rather than once per page. The same parameters list the page's ids alone
    (``page_taken_ids``).
    """

    params: dict[str, Any]
    # A dry page counts (page_dry_run.sql), planned with seq scans off
    # (page_dry_run_plan.sql says why); otherwise it writes (page_write.sql).
    dry_run: bool = False
    # Each group's weight (page_plan.weights), bound only where a page is
    # weighed: scheduled pages need not parse it.
    weights: Jsonb = _NO_WEIGHTS
    # The most rows one duty of the run can owe (page_plan.heaviest).
    heaviest: int = 0
    # params (their arrays) and weights as every page binds them, dumped once.
    _bound: dict[str, Any] = field(init=False, repr=False, compare=False)
    _bound_weights: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bound = {key: encode(v) if isinstance(v, list) else v for key, v in self.params.items()}
        object.__setattr__(self, "_bound", bound)
        object.__setattr__(self, "_bound_weights", encode(self.weights))

    def bind(
        self,
        after: str | None,
        upto: str | None,
        size: int,
        page_rows: int | None,
        excluded: Sequence[str],
        *,
        excluded_keys: Sequence[tuple[str, str]] = (),
    ) -> dict[str, Any]:
        """What one page of this statement binds: the run's values, then the page's own.

        ``excluded``: ids the run set aside, every row of each; ``excluded_keys``:
        ``(organization_id, id)`` of rows set aside alone (their id is shared).
        """
        budget = self.budget(size, page_rows)
        return {
            **self._bound,
            "after": after,
            "upto": upto,
            "size": size,
            "page_rows": budget,
            "weights": _NO_WEIGHTS if budget is None else self._bound_weights,
            "excluded": list(excluded),
            "excluded_organizations": [organization for organization, _ in excluded_keys],
            "excluded_keyed_ids": [duty_id for _, duty_id in excluded_keys],
        }

    def page_size(self, chunk_size: int, page_rows: int | None) -> int:
        """The duties a page of this statement takes (``page_plan.page_size``)."""
        return page_plan.page_size(chunk_size, page_rows, self.heaviest)

    def budget(self, size: int, page_rows: int | None) -> int | None:
        """The row budget a page of ``size`` duties is held to (``page_plan.budget``)."""
        return page_plan.budget(size, page_rows, self.heaviest)


def page_statement(
    scope: Scope,
    ready: Sequence[tuple[Group, Schedule]],
    rules: Rules,
    *,
    dry_run: bool,
    rejudge: bool = False,
    keeps_accounts: bool = True,
) -> PageStatement:
    """The statement that inserts (page_write.sql) or, dry, counts (page_dry_run.sql) owed tasks.

    ``rejudge``: the rules changed since the previous run (plan.Account.rejudged);
    ``keeps_accounts`` False: the run writes no account (a manual run at a
    future clock).
    """
    weights = page_plan.weights(ready)
    return PageStatement(
        params={
            **scope_params(scope),
            **_lead_thresholds(),
            **_arrays(ready, rules),
            "rejudge": rejudge,
            "keeps_accounts": keeps_accounts,
        },
        dry_run=dry_run,
        weights=Jsonb(weights),
        heaviest=page_plan.heaviest(weights),
    )


def dispatch_page(
    conn: Connection,
    page: PageStatement,
    after: str | None,
    upto: str | None,
    size: int,
    *,
    page_rows: int | None = None,
    excluded: Sequence[str] = (),
    excluded_keys: Sequence[tuple[str, str]] = (),
    time_limit_ms: int | None = None,
    probe: bool = False,
) -> PageResult:
    """Run ``page`` on the first ``size`` duties in ``(after, upto]``: one transaction.

    A None bound is open. The page ends early, after its first duty, where the
    rows its duties can owe would pass ``page_rows`` (None: no such bound).
    Duties in ``excluded`` and rows in ``excluded_keys`` (set aside by the
    run, ``PageStatement.bind``) are not part of the page.
    ``time_limit_ms`` lowers the statement timeout for this page alone.
    ``probe`` writes through page_write_rerun.sql, which looks the owed rows
    up before inserting those absent (``page_plan.rows_mostly_present`` says
    when): the same rows and the same result, at another cost. A dry page
    writes nothing, so it has nothing to probe.
    """
    query = statement(_page_file(page, probe=probe))
    params = page.bind(after, upto, size, page_rows, excluded, excluded_keys=excluded_keys)
    # Never prepared: a prepared statement would switch to a generic plan after
    # five pages, and that plan, guessing at the cursor and the page size,
    # measures slower than planning each page afresh (docs/performance.md has
    # the figures; `make bench` re-measures them). Planned with its values, each
    # null test on the bounds and the scope folds away. It also leaves
    # RDS Proxy and direct connections running the very same plan.
    settings: list[tuple[str, dict[str, Any]]] = []
    if page.dry_run:
        settings.append(("page_dry_run_plan", {}))
    if time_limit_ms is not None:
        settings.append(("statement_time_limit", {"ms": max(time_limit_ms, 1)}))
    if not settings:
        # One statement in autocommit is one transaction: the page's inserts
        # and its advances commit together, with no BEGIN/COMMIT round trips.
        row = named_row(conn.execute(query, params, prepare=False))
    else:
        # A transaction of the page's own, so that each SET LOCAL is the
        # page's alone and ends with it: the warm connection's next statement
        # is planned and timed as usual.
        with conn.transaction():
            for name, values in settings:
                conn.execute(statement(name), values)
            row = named_row(conn.execute(query, params, prepare=False))
    assert row is not None  # an aggregate-only query always returns one row  # noqa: S101
    return PageResult.of(row)


def _page_file(page: PageStatement, *, probe: bool) -> str:
    if page.dry_run:
        return "page_dry_run"
    return "page_write_rerun" if probe else "page_write"


def _arrays(ready: Sequence[tuple[Group, Schedule]], rules: Rules) -> dict[str, list[Any]]:
    # Each schedule's periods travel once, however many groups share it: keyed
    # by value, as groups of one frequency whose zones share today's date (or,
    # in a backfill, every zone) plan equal schedules, and sending each copy
    # made the period arrays grow with the zones and lead buckets in use.
    numbers: dict[Schedule, int] = {}
    arrays: dict[str, list[Any]] = {
        name: []
        for name in (
            "c_schedule", "c_frequency", "c_timezone", "c_lead_bucket", "c_today", "c_horizon",
            "c_origin", "c_first", "c_max_lead", "c_offset", "c_offset_until", "p_schedule",
            "p_key", "p_first", "p_last", "p_before",
        )
    }  # fmt: skip
    for group, schedule in ready:
        number = numbers.get(schedule)
        if number is None:
            number = numbers[schedule] = len(numbers)
            # The period after the candidates travels with them: page_owed.sql
            # never takes it for one (it starts after the largest lead's reach).
            following = () if schedule.after is None else (schedule.after,)
            before: date | None = None
            for period in (*schedule.periods, *following):
                arrays["p_schedule"].append(number)
                arrays["p_key"].append(period.key)
                arrays["p_first"].append(period.first_day)
                arrays["p_last"].append(period.last_day)
                arrays["p_before"].append(before)
                before = period.first_day
        arrays["c_schedule"].append(number)
        arrays["c_frequency"].append(group.frequency)
        arrays["c_timezone"].append(group.timezone)
        arrays["c_lead_bucket"].append(group.lead_bucket)
        arrays["c_today"].append(schedule.today)
        arrays["c_horizon"].append(schedule.horizon)
        arrays["c_origin"].append(schedule.origin)
        arrays["c_first"].append(schedule.periods[0].first_day if schedule.periods else None)
        arrays["c_max_lead"].append(group.max_lead)
        offset, until = (
            (None, None)
            if schedule.today is None
            else page_plan.widest_utc_offset(group.timezone, schedule.today)
        )
        arrays["c_offset"].append(offset)
        arrays["c_offset_until"].append(until)
    rolled = page_plan.rolled_days(arrays["p_first"], arrays["p_last"], rules.accepted)
    return {
        **arrays,
        **_rule_arrays(rules.accepted, "a"),
        "r_calendar": [each.calendar for each in rolled],
        "r_day": [each.day for each in rolled],
        "r_following": [each.following for each in rolled],
        "r_preceding": [each.preceding for each in rolled],
    }


def page_taken_ids(
    conn: Connection,
    page: PageStatement,
    after: str | None,
    upto: str | None,
    size: int,
    *,
    page_rows: int | None = None,
    excluded: Sequence[str] = (),
    excluded_keys: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """The ids ``dispatch_page`` would take for these arguments, in page order (row budget too)."""
    params = page.bind(after, upto, size, page_rows, excluded, excluded_keys=excluded_keys)
    rows = named_rows(conn.execute(statement("page_taken_ids"), params, prepare=False))
    return [str(row["id"]) for row in rows]


def page_duty_rows(
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
    params = {
        **scope_params(scope),
        "after": after,
        "upto": upto,
        "size": size,
        "excluded": list(excluded),
        "excluded_organizations": [],
        "excluded_keyed_ids": [],
    }
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        return list(cursor.execute(statement("page_duty_rows"), params, prepare=False).fetchall())


def any_dispatchable(conn: Connection, scope: Scope, after: str | None, upto: str | None) -> bool:
    """Whether any dispatchable duty in scope lies in ``(after, upto]`` (None: open)."""
    params = {**scope_params(scope), "after": after, "upto": upto}
    row = named_row(conn.execute(statement("any_dispatchable"), params, prepare=False))
    return bool(row and row["found"])


@dataclass(frozen=True, slots=True)
class LockedRows:
    """The duty rows another transaction holds locked against an update."""

    # (organization_id, id) of each, in the order of the ids asked about.
    keys: tuple[tuple[str, str], ...]
    # Those ids with a row no one holds: another organisation's duty shares it.
    shared: frozenset[str]


def locked_rows(conn: Connection, ids: Sequence[str], scope: Scope) -> LockedRows:
    """Of the duties ``ids`` a run of ``scope`` reads, the rows another transaction holds locked.

    Locked against an update; a namesake the run does not read is left out.
    """
    params = {**scope_params(scope), "ids": list(ids)}
    rows = list(named_rows(conn.execute(statement("locked_rows"), params)))
    place = {duty_id: n for n, duty_id in enumerate(ids)}
    keys = sorted(
        ((str(row["organization_id"]), str(row["id"])) for row in rows),
        key=lambda key: (place.get(key[1], len(place)), key[0]),
    )
    return LockedRows(tuple(keys), frozenset(str(row["id"]) for row in rows if row["shared"]))

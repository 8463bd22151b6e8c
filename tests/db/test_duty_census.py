"""One scan counts what a run learns before its pages, as the planner's own rules count it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from dispatch_fn.db import store
from dispatch_fn.db.sql import statement
from dispatch_fn.engine import periods
from dispatch_fn.errors import PeriodError
from dispatch_fn.planning import Scope, classify, lead_bucket
from support import duty, insert_duties


def _in_range(row: dict[str, Any]) -> bool:
    """Offsets and grace as the engine accepts them (duly_due_rule_in_range's oracle)."""
    try:
        periods.check_due_rule(row["due_anchor"], row["due_offset_days"], row["due_offset_months"])
        periods.check_grace_days(row["grace_days"])
    except PeriodError:
        return False
    return True


def _expected(rows: list[dict[str, Any]], scope: Scope) -> store.Census:
    """The three sets, counted one duty at a time in Python."""
    left_out: Counter[tuple[Any, Any, Any]] = Counter()
    groups: dict[tuple[Any, str, int], list[int]] = {}
    rules: dict[tuple[str, str, str | None], list[int]] = {}
    for row in rows:
        if scope.organization_id not in (None, row["organization_id"]):
            continue
        if classify(row["form"], row["status"], row["review_status"]) is not None:
            left_out[row["form"], row["status"], row["review_status"]] += 1
            continue
        key = (row["frequency"], row["timezone"], lead_bucket(row["lead_days"]))
        members = groups.setdefault(key, [])
        members.append(row["lead_days"])
        rule = rules.setdefault(
            (row["due_anchor"], row["due_roll"], row["holiday_calendar"]), [0, 0]
        )
        rule[0] += 1
        rule[1] += not _in_range(row)
    return store.Census(
        tuple(
            store.NotDispatched(form=form, status=status, review_status=review, duties=n)
            for (form, status, review), n in left_out.items()
        ),
        tuple(
            store.Group(
                frequency=frequency,
                timezone=timezone,
                lead_bucket=bucket,
                duties=len(leads),
                max_lead=max(leads),
            )
            for (frequency, timezone, bucket), leads in groups.items()
        ),
        tuple(
            store.DueRule(
                due_anchor=anchor,
                due_roll=roll,
                holiday_calendar=calendar,
                duties=n,
                out_of_range=bad,
            )
            for (anchor, roll, calendar), (n, bad) in rules.items()
        ),
    )


def _sorted(census: store.Census) -> tuple[list[Any], list[Any], list[Any]]:
    return (
        sorted(census.undispatchable, key=repr),
        sorted(census.groups, key=repr),
        sorted(census.rules, key=repr),
    )


@st.composite
def duties(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Duties of every form, status and review, a few frequencies, zones, leads and rules."""
    rows = []
    for n in range(draw(st.integers(0, 25))):
        anchor = draw(st.sampled_from(["period_start", "period_end", "after_period_end"]))
        rows.append(
            duty(
                f"d{n:02}",
                organization_id=draw(st.sampled_from(["org-a", "org-b"])),
                form=draw(st.sampled_from(["recurring"] * 4 + ["standing", "one_off", "x", None])),
                status=draw(st.sampled_from(["active"] * 4 + ["paused", "retired", None])),
                review_status=draw(st.sampled_from(["approved"] * 4 + ["to_review", None])),
                frequency=draw(st.sampled_from(["monthly", "weekly", "hourly", None])),
                timezone=draw(st.sampled_from(["UTC", "Europe/Berlin", "Mars/Olympus"])),
                # Pairs that share a bucket (5 and 6, 33 and 40), so groups have a
                # largest lead, and the buckets' edges (1, 32, 63, 64).
                lead_days=draw(st.sampled_from([-3_660, 0, 1, 5, 6, 32, 33, 40, 63, 64, 400])),
                due_anchor=anchor,
                due_offset_days=draw(st.integers(-3, 40) | st.just(400)),
                due_offset_months=draw(st.integers(0, 2) | st.just(30)),
                due_roll=draw(st.sampled_from(["none", "following", "sideways"])),
                holiday_calendar=draw(st.sampled_from([None, "US", "Atlantis"])),
                grace_days=draw(st.integers(0, 30) | st.just(400)),
            )
        )
    return rows


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=duties(), organization_id=st.none() | st.just("org-a"))
def test_census_counts_every_set_as_the_planner_does(
    conn: psycopg.Connection[Any], rows: list[dict[str, Any]], organization_id: str | None
) -> None:
    conn.execute("DELETE FROM duly_duty")
    insert_duties(conn, rows)
    scope = Scope(organization_id=organization_id)

    found = store.census(conn, scope)

    assert _sorted(found) == _sorted(_expected(rows, scope))


def test_census_of_a_scope_without_duties_is_empty(conn: psycopg.Connection[Any]) -> None:
    insert_duties(conn, [duty("d1", organization_id="org-a")])

    found = store.census(conn, Scope(organization_id="org-none"))

    assert found == store.Census((), (), ())


def test_a_group_carries_its_largest_lead(conn: psycopg.Connection[Any]) -> None:
    # 33 and 40 share a lead bucket (32-63): one group, planned for 40.
    insert_duties(conn, [duty("d1", lead_days=40), duty("d2", lead_days=33)])

    found = store.census(conn, Scope())

    assert found.groups == (
        store.Group(
            frequency="monthly", timezone="UTC", lead_bucket=lead_bucket(40), duties=2, max_lead=40
        ),
    )


class _Explaining(psycopg.Connection[Any]):
    """Plans the census statement before it runs, in its session and transaction as they are."""

    plans: list[str]
    census_params: Any = None  # what store.census binds, for planning it again outside

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if query == statement("duty_census"):
            self.census_params = params
            self.plans.append(self.explain(params))
        return super().execute(query, params, **kwargs)

    def explain(self, params: Any) -> str:
        explained = super().execute(
            sql.SQL("EXPLAIN ") + statement("duty_census"), params, prepare=False
        )
        return "\n".join(str(row[0]) for row in explained)


def _many_groups_guessed(conn: psycopg.Connection[Any]) -> None:
    # Seven frequencies in 400 zones: the planner, with no statistics for the
    # lead bucket, guesses groups by the thousand, as it does by the ten
    # thousand at a million duties (census_plan.sql).
    conn.execute(
        "INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id, source,"
        "                       frequency, timezone, lead_days)"
        " SELECT 'd' || n, 'org-a', 'Duty', 'recurring', 'active', 'u1', 'test',"
        "        (ARRAY['daily', 'weekly', 'fortnightly', 'monthly', 'quarterly',"
        "               'semiannual', 'annual'])[1 + n % 7],"
        "        'Zone/' || (n / 7 % 400), n % 50"
        " FROM generate_series(1, 20000) n"
    )
    conn.execute("ANALYZE duly_duty")
    # Little memory, so that a guess this size outgrows it as 28,078 groups
    # outgrow the default 8 MB of hash_mem, 4 MB of work_mem times 2
    # (docs/performance-history.md#census-memory). The census's 64 MB is a thousand
    # times this session's, against 16 times the default: the test shows that
    # the census plans with its own memory, not that 64 MB is enough at a
    # million duties, which the bench measures.
    conn.execute("SET work_mem = '64kB'")


def test_the_census_hashes_every_set_with_room_beyond_the_sessions_memory(
    db_url: str,
) -> None:
    with _Explaining.connect(db_url, autocommit=True) as conn:
        conn.plans = []
        _many_groups_guessed(conn)

        found = store.census(conn, Scope())

        (plan,) = conn.plans
        assert "HashAggregate" in plan
        assert "Sort" not in plan
        # The trap: the same statement, planned as the session would plan it,
        # sorts the duties.
        unaided = conn.explain(conn.census_params)
        assert "MixedAggregate" in unaided
        assert "Sort" in unaided
        assert sum(group.duties for group in found.groups) == 20000
        # The room is the census's alone: the session's own setting is back,
        # and so it is inside a transaction of the caller's.
        assert conn.execute("SHOW work_mem").fetchone() == ("64kB",)
        with conn.transaction():
            store.census(conn, Scope())
            assert conn.execute("SHOW work_mem").fetchone() == ("64kB",)
        assert len(conn.plans) == 2


def test_the_faults_of_a_refused_calendar_named_empty_leave_out_the_duties_of_no_calendar(
    conn: psycopg.Connection[Any],
) -> None:
    # '' is a calendar no engine knows (refused); a duty with none shares its
    # anchor and roll, and is no fault: it is not read as one.
    insert_duties(conn, [duty("bad", holiday_calendar=""), duty("good")])
    refused = store.DueRule(
        due_anchor="period_start", due_roll="none", holiday_calendar="", duties=1
    )
    members = store.fault_members(conn, Scope(), [], store.Rules(refused=(refused,)))

    assert [row["id"] for row in members] == ["bad"]

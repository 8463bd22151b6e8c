"""The bench's week at a tiny N: seven daily runs, each against a floor of exactly its rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from bench.dispatch.child import ChildSpec
from bench.dispatch.data import CLOCK, generate
from bench.dispatch.day_floor import copy_tables_as_they_stand, mark_day, stage_day
from bench.dispatch.dispatcher import ChildRun, run_child
from bench.dispatch.judging import week_verdicts
from bench.dispatch.mix import CLASSIC
from bench.dispatch.render import render_week
from bench.dispatch.server import BenchError, Conn, fresh_database, scalar
from bench.dispatch.week import WEEK_DAYS, Week, run_day, run_week
from support import session_layout

pytestmark = pytest.mark.slow

DUTIES = 1500


@pytest.fixture(scope="module")
def database(server_dsn: str) -> Iterator[tuple[Conn, ChildSpec]]:
    """Tiny generated duties in the session's layout, the first run made."""
    with (
        fresh_database(server_dsn, "week", session_layout()) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        generate(conn, DUTIES, 100, CLASSIC)
        spec = ChildSpec(dsn=dsn, now=CLOCK.isoformat(), chunk_size=400, workers=1, recorded=True)
        run_child(conn, spec)
        yield conn, spec


@pytest.fixture(scope="module")
def week(database: tuple[Conn, ChildSpec]) -> Week:
    conn, spec = database
    return run_week(conn, spec)


def _fingerprint(conn: Conn, table: str, order: str) -> str:
    # Every column's value, the task's id left out: the floor's copy numbers its own.
    return str(
        scalar(
            conn,
            f"SELECT md5(string_agg((to_jsonb(t) - 'id' - 'created_at')::text, ','"
            f" ORDER BY {order})) FROM {table} t",
        )
    )


def test_the_week_is_seven_days_at_the_next_scheduled_clocks(week: Week) -> None:
    assert len(week.days) == WEEK_DAYS == 7
    assert [day.clock for day in week.days] == [
        (CLOCK + timedelta(days=n)).isoformat() for n in range(1, 8)
    ]
    assert week.tasks_created == sum(day.tasks_created for day in week.days) > 0


def test_each_days_floor_writes_exactly_the_rows_the_day_wrote(week: Week) -> None:
    for day in week.days:
        assert day.floor.inserted == day.tasks_created
        assert day.floor.written.inserted["floor_task"] == day.tasks_created
        assert isinstance(day.dispatcher, ChildRun)
        assert day.dispatcher.written.inserted["duly_task"] == day.tasks_created
        # The duty rows the day made a version of, each written once by the floor.
        assert day.floor.advanced == day.duties_written == day.floor.written.updated["floor_duty"]
        assert day.dispatcher.written.updated["duly_duty"] == day.duties_written
        assert "last_dispatched_period" in day.changed_columns
        # A clock the wall clock has not reached keeps no account (docs/contract.md#account).
        assert ("dispatch_through" in day.changed_columns) is not day.ahead_of_wall_clock


def test_after_the_week_the_floors_copies_hold_what_the_dispatchers_tables_hold(
    week: Week, database: tuple[Conn, ChildSpec]
) -> None:
    conn, _ = database
    assert week.days
    assert _fingerprint(conn, "floor_duty", "organization_id, id") == _fingerprint(
        conn, "duly_duty", "organization_id, id"
    )
    identity = "organization_id, duty_id, owner_id, period_key"
    assert _fingerprint(conn, "floor_task", identity) == _fingerprint(conn, "duly_task", identity)


def test_the_weeks_ratios_sum_the_days_and_print_beside_their_goals(week: Week) -> None:
    cpu, floor_cpu = week.server_cpu_seconds, week.floor_server_cpu_seconds
    assert week.wall_ratio == pytest.approx(week.seconds / week.floor_seconds)
    if cpu is not None and floor_cpu:
        assert week.server_cpu_ratio == pytest.approx(cpu / floor_cpu)
        assert week.server_cpu_ms_per_task == pytest.approx(cpu * 1000 / week.tasks_created)
    verdicts = week_verdicts(week)
    assert [v.bar for v in verdicts] == ["(goal) <= 1.25x", "(goal) <= 1.00x"]
    assert not any(v.judged for v in verdicts)
    table = render_week(week)
    assert len(table) >= 2 + WEEK_DAYS + 1
    assert table[2 + WEEK_DAYS].startswith("week")


def test_a_day_is_staged_from_the_rows_written_after_its_mark(server_dsn: str) -> None:
    with (
        fresh_database(server_dsn, "day", session_layout()) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        generate(conn, 50, 5, CLASSIC)
        copy_tables_as_they_stand(conn)
        mark = mark_day(conn)
        conn.execute(
            "UPDATE duly_duty SET dispatch_through = date '2026-11-30'"
            " WHERE id = (SELECT min(id) FROM duly_duty)"
        )
        staged = stage_day(conn, mark)
        assert (staged.tasks, staged.duties, staged.changed_columns) == (
            0,
            1,
            ("dispatch_through",),
        )


def test_a_day_whose_run_and_rows_disagree_is_refused(database: tuple[Conn, ChildSpec]) -> None:
    conn, spec = database

    def miscounted(conn: Conn, spec: ChildSpec) -> ChildRun:
        run = run_child(conn, spec)
        return dataclasses.replace(run, tasks_created=run.tasks_created + 1)

    later = dataclasses.replace(spec, now=(CLOCK + timedelta(days=30)).isoformat())
    with pytest.raises(BenchError, match="tasks created"):
        run_day(conn, later, miscounted)

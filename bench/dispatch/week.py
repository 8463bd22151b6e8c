"""The week: the daily runs at the seven scheduled clocks after the first, each against its floor.

The schedule is daily at 01:00 UTC, as the bench's clock is, so the week's
clocks are that clock plus one to seven days. Each day starts after the
vacuum autovacuum would make (``server.vacuum``) of both sides' tables; the
dispatcher runs (one child, or a chain of invocations at scale), then the
floor writes exactly the rows it wrote (``day_floor``) into the copies as
they stood before the day. The floor must write as many tasks as the day
created, or the week is refused: a ratio over different rows means nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from bench.dispatch.chain import ChainRun
from bench.dispatch.child import ChildSpec
from bench.dispatch.day_floor import (
    copy_tables_as_they_stand,
    drop_day_stage,
    mark_day,
    run_day_floor,
    stage_day,
)
from bench.dispatch.dispatcher import ChildRun, run_child
from bench.dispatch.floor import FloorRun
from bench.dispatch.server import DISPATCH_TABLES, FLOOR_TABLES, BenchError, Conn, scalar, vacuum

WEEK_DAYS: Final = 7
SCHEDULE_INTERVAL: Final = timedelta(days=1)

type DayRunner = Callable[[Conn, ChildSpec], ChildRun | ChainRun]


@dataclass(frozen=True, slots=True)
class Day:
    """One daily run and the floor of its rows."""

    clock: str
    dispatcher: ChildRun | ChainRun
    floor: FloorRun
    duties_written: int  # duty rows whose version the day made (the floor's UPDATE's rows)
    changed_columns: tuple[str, ...]
    # The clock was later than the server's wall clock when the run started:
    # the dispatcher takes it for a manual run at a future clock, which keeps
    # no account (docs/contract.md#account), so the day is not a scheduled one.
    ahead_of_wall_clock: bool

    @property
    def tasks_created(self) -> int:
        """Tasks the day created (the floor inserted as many)."""
        return self.dispatcher.tasks_created

    @property
    def server_cpu_ratio(self) -> float:
        """The day's server CPU over its floor's; NaN where either could not be read."""
        return _ratio(self.dispatcher.server_cpu_seconds, self.floor.server_cpu_seconds)

    @property
    def wall_ratio(self) -> float:
        """The day's wall time over its floor's."""
        return _ratio(self.dispatcher.seconds, self.floor.seconds)


@dataclass(frozen=True, slots=True)
class Week:
    """The week's days, in order, and their sums."""

    days: tuple[Day, ...]

    @property
    def tasks_created(self) -> int:
        """Tasks the week created."""
        return sum(day.tasks_created for day in self.days)

    @property
    def server_cpu_seconds(self) -> float | None:
        """The dispatcher's server CPU over the week; None where a day's could not be read."""
        return _sum(day.dispatcher.server_cpu_seconds for day in self.days)

    @property
    def floor_server_cpu_seconds(self) -> float | None:
        """The floor's server CPU over the week; None where a day's could not be read."""
        return _sum(day.floor.server_cpu_seconds for day in self.days)

    @property
    def seconds(self) -> float:
        """The dispatcher's wall time over the week."""
        return sum(day.dispatcher.seconds for day in self.days)

    @property
    def floor_seconds(self) -> float:
        """The floor's wall time over the week."""
        return sum(day.floor.seconds for day in self.days)

    @property
    def server_cpu_ratio(self) -> float:
        """The week's server CPU over the floor's, each summed over the days."""
        return _ratio(self.server_cpu_seconds, self.floor_server_cpu_seconds)

    @property
    def wall_ratio(self) -> float:
        """The week's wall time over the floor's, each summed over the days."""
        return _ratio(self.seconds, self.floor_seconds)

    @property
    def server_cpu_ms_per_task(self) -> float:
        """The dispatcher's server CPU per task the week created, in milliseconds."""
        return _ratio(self.server_cpu_seconds, self.tasks_created / 1000)

    @property
    def ahead_of_wall_clock(self) -> tuple[int, ...]:
        """The days (1 to 7) whose clock the wall clock had not reached."""
        return tuple(n for n, day in enumerate(self.days, start=1) if day.ahead_of_wall_clock)


def run_week(
    conn: Conn, spec: ChildSpec, *, days: int = WEEK_DAYS, run: DayRunner = run_child
) -> Week:
    """The daily runs after ``spec``'s clock, each against its floor.

    Called after the first run (and whatever re-runs at its clock): the
    floor's copies are made of the tables as they stand, then follow them.
    ``run`` makes one day's dispatcher run: a child, or a chain at scale.
    """
    copy_tables_as_they_stand(conn)
    first = datetime.fromisoformat(spec.now)
    return Week(
        tuple(
            run_day(
                conn,
                dataclasses.replace(spec, now=(first + n * SCHEDULE_INTERVAL).isoformat()),
                run,
            )
            for n in range(1, days + 1)
        )
    )


def run_day(conn: Conn, spec: ChildSpec, run: DayRunner = run_child) -> Day:
    """One day: the vacuum, the dispatcher's run, its rows staged, the floor's run."""
    vacuum(conn, DISPATCH_TABLES)
    vacuum(conn, FLOOR_TABLES)
    ahead = bool(scalar(conn, "SELECT %s::timestamptz > now()", (spec.now,)))
    mark = mark_day(conn)
    dispatched = run(conn, spec)
    try:
        staged = stage_day(conn, mark)
        if staged.tasks != dispatched.tasks_created:
            raise BenchError(
                f"the run at {spec.now} reports {dispatched.tasks_created:,} tasks created, "
                f"but {staged.tasks:,} new rows are in duly_task"
            )
        floor = run_day_floor(conn, staged)
    finally:
        drop_day_stage(conn)
    if floor.inserted != dispatched.tasks_created or floor.advanced != staged.duties:
        raise BenchError(
            f"the floor of {spec.now} wrote {floor.inserted:,} tasks and {floor.advanced:,} "
            f"duties; the day wrote {dispatched.tasks_created:,} and {staged.duties:,}"
        )
    return Day(
        clock=spec.now,
        dispatcher=dispatched,
        floor=floor,
        duties_written=staged.duties,
        changed_columns=staged.changed_columns,
        ahead_of_wall_clock=ahead,
    )


def _sum(values: Iterable[float | None]) -> float | None:
    read = list(values)
    if any(each is None for each in read):
        return None
    return sum(each or 0.0 for each in read)


def _ratio(numerator: float | None, denominator: float | None) -> float:
    if numerator is None or denominator is None:
        return math.nan
    return numerator / denominator if denominator > 0 else math.inf

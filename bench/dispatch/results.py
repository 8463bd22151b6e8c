"""Every figure of one benchmark run, pass by pass, and each line of the bar they are judged by."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, Final

from bench.dispatch.data import DataSummary
from bench.dispatch.disk import DiskCheck
from bench.dispatch.dispatcher import ChildRun
from bench.dispatch.floor import FloorRun
from bench.dispatch.naive import NaiveRun
from bench.dispatch.week import Week


class Bar(StrEnum):
    """The lines of the bar, in the order they are judged and printed."""

    FIRST_VS_FLOOR = "first_vs_floor"
    FLOOR_ROWS_EQUAL = "floor_rows_equal"
    NOOP_VS_FLOOR_NOOP = "noop_vs_floor_noop"
    RETRY_VS_FLOOR_RETRY = "retry_vs_floor_retry"
    NOOP_ROWS_WRITTEN = "noop_rows_written"
    NAIVE_VS_FIRST = "naive_vs_first"
    RSS_AT_N = "rss_at_n"
    RSS_GROWTH = "rss_growth"
    ROUND_TRIPS = "round_trips"
    LAMBDA_BUDGET = "lambda_budget"
    SERVER_CPU_FIRST = "server_cpu_first"
    SERVER_CPU_NOOP = "server_cpu_noop"
    NOOP_VS_FIRST_CPU = "noop_vs_first_cpu"
    WEEK_SERVER_CPU = "week_server_cpu"
    WEEK_WALL = "week_wall"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One line of the bar: a measured ratio or figure against its limit."""

    key: Bar
    name: str
    value: float
    shown: str
    bar: str
    passed: bool
    # False: shown beside the bar for information, not part of it.
    judged: bool = True


@dataclass(frozen=True, slots=True)
class NoopRound:
    """One no-op round: the dispatcher's no-op, then the floor's, on the tables as they are."""

    dispatcher: ChildRun
    floor: FloorRun


@dataclass(frozen=True, slots=True)
class WorkSplit:
    """The first run's server CPU against the floor's, split by its dry run (a0).

    A dry run applies every rule to every duty and writes nothing. Before the
    first run, with no task made yet, it is about the first run's work less
    the writes: the working out that the floor, inserting rows staged for
    it, never pays for. About: its probes and lookups stand in for the
    conflict checks and lookups the first run makes inside its writes
    (docs/performance-history.md#rules-alone).
    """

    working_out_seconds: float  # a0's server CPU
    writing_seconds: float  # the first run's less a0's
    floor_seconds: float  # the floor's, both ratios' denominator

    @property
    def working_out(self) -> float:
        """a0's server CPU over the floor's."""
        return self.working_out_seconds / self.floor_seconds

    @property
    def writing(self) -> float:
        """The first run's server CPU less a0's, over the floor's."""
        return self.writing_seconds / self.floor_seconds


@dataclass(kw_only=True, slots=True)
class Pass:
    """The figures every pass measures: one (mix, layout) against the floor, in a fresh database.

    A comparison pass (another mix or layout) is one of these; the full pass,
    ``Results``, adds the phases only it makes.
    """

    parameters: dict[str, Any]
    disk: DiskCheck
    data: DataSummary
    settled: bool
    # a0: the first run's very request, dry, before it: every rule applied to
    # every duty, nothing written (work_split).
    dry: ChildRun
    first: ChildRun
    retry: ChildRun
    noop: ChildRun
    staged_rows: int
    floor: FloorRun
    floor_retry: FloorRun
    floor_noop: FloorRun
    # The no-op rounds after the first (``noop`` and ``floor_noop``), in order.
    noop_again: tuple[NoopRound, ...] = ()
    # The daily runs at the seven clocks after the first, each against the
    # floor of its rows (``week``); None where the pass was asked to skip it.
    week: Week | None = None
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def noop_rounds(self) -> tuple[NoopRound, ...]:
        """Every no-op round of the pass: the first after the vacuum, then the others."""
        return (NoopRound(self.noop, self.floor_noop), *self.noop_again)

    @property
    def runs(self) -> tuple[ChildRun, ...]:
        """Every dispatcher run of the pass."""
        return (
            self.dry,
            self.first,
            self.retry,
            *(each.dispatcher for each in self.noop_rounds),
            *self.week_runs,
        )

    @property
    def week_runs(self) -> tuple[ChildRun, ...]:
        """The week's daily runs, when the pass made it."""
        days = () if self.week is None else self.week.days
        return tuple(day.dispatcher for day in days if isinstance(day.dispatcher, ChildRun))

    @property
    def code_versions(self) -> list[str]:
        """Fingerprints of the dispatcher code the runs used; more than one is a mixed run."""
        return sorted({run.code for run in self.runs})

    @property
    def work_split(self) -> WorkSplit | None:
        """The first run's server CPU split by a0; None where a CPU could not be read."""
        dry, first = self.dry.server_cpu_seconds, self.first.server_cpu_seconds
        floor = self.floor.server_cpu_seconds
        if dry is None or first is None or not floor:
            return None
        return WorkSplit(working_out_seconds=dry, writing_seconds=first - dry, floor_seconds=floor)

    @property
    def passed(self) -> bool:
        """Whether every judged line of the bar passed."""
        return all(each.passed for each in self.verdicts if each.judged)

    def verdict(self, key: Bar) -> Verdict:
        """The verdict on one line of the bar."""
        for each in self.verdicts:
            if each.key is key:
                return each
        raise KeyError(f"no verdict on {key!r}; judged: {[v.key for v in self.verdicts]}")

    def as_json(self) -> dict[str, Any]:
        """Everything, JSON-serialisable."""
        return {**asdict(self), "code_versions": self.code_versions}


def phases_of(measured: Pass) -> dict[str, Any]:
    """``measured``'s fields by name, for the full pass's ``Results`` built on them."""
    return {each.name: getattr(measured, each.name) for each in fields(Pass)}


@dataclass(kw_only=True, slots=True)
class Results(Pass):
    """Every figure of the full benchmark run: a pass's, and the backfill, the naive path, N/10."""

    server: dict[str, Any]
    backfill: ChildRun
    backfill_again: ChildRun
    naive: NaiveRun
    tenth_data: DataSummary
    tenth_first: ChildRun

    @property
    def runs(self) -> tuple[ChildRun, ...]:
        """Every dispatcher run, at N and at N/10."""
        return (
            self.dry,
            self.first,
            self.retry,
            *(each.dispatcher for each in self.noop_rounds),
            *self.week_runs,
            self.backfill,
            self.backfill_again,
            self.tenth_first,
        )


# The ratios the side-by-side table shows of every pass, in its columns' order.
SIDE_BY_SIDE: Final = (
    Bar.FIRST_VS_FLOOR,
    Bar.SERVER_CPU_FIRST,
    Bar.NOOP_VS_FLOOR_NOOP,
    Bar.SERVER_CPU_NOOP,
    Bar.NOOP_VS_FIRST_CPU,
)
# The week's, when the pass made it.
WEEK_SIDE_BY_SIDE: Final = (Bar.WEEK_SERVER_CPU, Bar.WEEK_WALL)


@dataclass(frozen=True, slots=True)
class SideBySide:
    """Every (mix, layout) one invocation measured on the same server, the full pass first."""

    full: Results
    compared: tuple[Pass, ...]

    @property
    def passes(self) -> tuple[Pass, ...]:
        """The full pass, then each comparison pass."""
        return (self.full, *self.compared)

    @property
    def passed(self) -> bool:
        """Whether every judged line of every pass passed."""
        return all(each.passed for each in self.passes)

    @property
    def code_versions(self) -> list[str]:
        """Fingerprints of the dispatcher code every pass used; more than one is a mixed run."""
        return sorted({code for each in self.passes for code in each.code_versions})

    def as_json(self) -> dict[str, Any]:
        """The table's figures a row a pass, then every pass's figures in full."""
        return {
            "server": self.full.server,
            "code_versions": self.code_versions,
            "rows": [side_by_side_row(each) for each in self.passes],
            "passes": [each.as_json() for each in self.passes],
        }


def side_by_side_row(measured: Pass) -> dict[str, Any]:
    """One pass's line of the side-by-side table; a ratio that could not be read is None."""
    ratios: dict[str, float | None] = {}
    for key in (*SIDE_BY_SIDE, *(() if measured.week is None else WEEK_SIDE_BY_SIDE)):
        value = measured.verdict(key).value
        ratios[str(key)] = None if math.isnan(value) else value
    week = measured.week
    split = measured.work_split
    return {
        "mix": measured.parameters["mix"],
        "layout": measured.parameters["layout"],
        "pass": measured.parameters["pass"],
        **ratios,
        "server_cpu_working_out": None if split is None else split.working_out,
        "server_cpu_writing": None if split is None else split.writing,
        "round_trips": measured.first.round_trips,
        "rss_peak_mib": measured.first.rss_peak_mib,
        "tasks_created": measured.first.tasks_created,
        "week_tasks_per_day": None if week is None else [d.tasks_created for d in week.days],
        "week_server_cpu_per_day": (
            None if week is None else [_number(day.server_cpu_ratio) for day in week.days]
        ),
        "week_server_cpu_ms_per_task": None
        if week is None
        else _number(week.server_cpu_ms_per_task),
        "failed": [each.name for each in measured.verdicts if each.judged and not each.passed],
    }


def _number(value: float) -> float | None:
    """``value``, or None for a figure that could not be read (NaN), as JSON has no NaN."""
    return None if math.isnan(value) else value

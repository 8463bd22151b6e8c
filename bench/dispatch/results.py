"""Every figure of one benchmark run, and each line of the bar they are judged by."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from bench.dispatch.data import DataSummary
from bench.dispatch.disk import DiskCheck
from bench.dispatch.dispatcher import ChildRun
from bench.dispatch.floor import FloorRun
from bench.dispatch.naive import NaiveRun


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


@dataclass(slots=True)
class Results:
    """Every figure of one benchmark run."""

    parameters: dict[str, Any]
    server: dict[str, Any]
    data: DataSummary
    first: ChildRun
    retry: ChildRun
    noop: ChildRun
    staged_rows: int
    floor: FloorRun
    floor_retry: FloorRun
    floor_noop: FloorRun
    backfill: ChildRun
    backfill_again: ChildRun
    naive: NaiveRun
    tenth_data: DataSummary
    tenth_first: ChildRun
    settled: bool
    disk: DiskCheck
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def code_versions(self) -> list[str]:
        """Fingerprints of the dispatcher code the runs used; more than one is a mixed run."""
        runs = (
            self.first,
            self.retry,
            self.noop,
            self.backfill,
            self.backfill_again,
            self.tenth_first,
        )
        return sorted({run.code for run in runs})

    def verdict(self, key: Bar) -> Verdict:
        """The verdict on one line of the bar."""
        for each in self.verdicts:
            if each.key is key:
                return each
        raise KeyError(f"no verdict on {key!r}; judged: {[v.key for v in self.verdicts]}")

    def as_json(self) -> dict[str, Any]:
        """Everything, JSON-serialisable."""
        return {**asdict(self), "code_versions": self.code_versions}

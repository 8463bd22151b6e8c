"""The dispatcher benchmark at a tiny N, so it cannot rot; its timings are not asserted."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from psycopg.conninfo import conninfo_to_dict

from bench.dispatch.benchmark import run_benchmark
from bench.dispatch.judging import ROUND_TRIPS_PER_PAGE_MAX, ROUND_TRIPS_PER_RUN_MAX
from bench.dispatch.options import Options
from bench.dispatch.render import render
from bench.dispatch.results import Bar, Results

pytestmark = pytest.mark.slow

OPTIONS = Options(
    duties=2000, backfill_duties=300, chunk_size=400, naive_sample=50, trace_round_trips=True
)


@pytest.fixture(scope="module")
def figures(server_dsn: str) -> Results:
    """One tiny benchmark run against the test server."""
    return run_benchmark(OPTIONS, server_dsn)


def test_generates_the_asked_mix(figures: Results) -> None:
    data = figures.data
    assert (data.mix, data.duties, data.big_org_duties) == ("classic", 2000, 300)
    # About 10 % are standing, one-off, paused or retired.
    assert 0.8 * 2000 < data.dispatchable < 0.97 * 2000
    assert data.cadences > 1
    assert figures.tenth_data.duties == 200


def test_first_run_creates_exactly_the_floors_rows(figures: Results) -> None:
    first, floor = figures.first, figures.floor
    assert first.tasks_created > 0
    assert first.tasks_created == figures.staged_rows == floor.inserted
    assert first.duties_advanced == floor.advanced


def test_written_rows_are_read_back_from_the_statistics(figures: Results) -> None:
    first = figures.first
    assert first.written.inserted["duly_task"] == first.tasks_created
    assert first.written.updated["duly_duty"] == first.duties_advanced
    assert figures.floor.written.inserted["floor_task"] == figures.floor.inserted


def test_no_op_runs_write_nothing(figures: Results) -> None:
    for run in (figures.retry, figures.noop, figures.backfill_again):
        assert run.tasks_created == 0
        assert run.written.total == 0
    for floor in (figures.floor_retry, figures.floor_noop):
        assert floor.inserted == floor.advanced == 0


def test_backfill_creates_then_repeats_nothing(figures: Results) -> None:
    assert figures.backfill.tasks_created > 0
    assert figures.backfill_again.tasks_existing == (
        figures.backfill.tasks_created + figures.backfill.tasks_existing
    )


def test_naive_sample_inserts_then_is_refused(figures: Results) -> None:
    naive = figures.naive
    assert naive.sample == naive.inserted == naive.noop_refused == 50
    assert naive.refused == 0
    assert naive.extrapolated_seconds == pytest.approx(
        naive.seconds / naive.sample * figures.staged_rows
    )


def test_round_trips_counted_are_those_on_the_wire(figures: Results) -> None:
    runs = {
        "first": figures.first,
        "retry": figures.retry,
        "noop": figures.noop,
        "backfill": figures.backfill,
        "backfill_again": figures.backfill_again,
        "tenth_first": figures.tenth_first,
    }
    for name, run in runs.items():
        assert run.round_trips == run.traced_round_trips, name
        assert run.rss_peak_mib > 0, name


def test_server_cpu_is_read_where_the_server_runs_on_this_machine(
    figures: Results, server_dsn: str
) -> None:
    host = conninfo_to_dict(server_dsn).get("host") or "/"  # libpq's default: a socket
    local = str(host).startswith("/") or host in ("localhost", "127.0.0.1", "::1")
    spent = [
        figures.first.server_cpu_seconds,
        figures.retry.server_cpu_seconds,
        figures.noop.server_cpu_seconds,
        figures.backfill.server_cpu_seconds,
        figures.tenth_first.server_cpu_seconds,
        figures.floor.server_cpu_seconds,
        figures.floor_noop.server_cpu_seconds,
    ]
    assert all((each is not None) is local for each in spent)
    assert all(each is None or each >= 0 for each in spent)
    if local:  # tick-granular (10 ms), but a first run does measurable work
        assert (figures.first.server_cpu_seconds or 0) > 0


def test_every_bar_is_judged_in_order(figures: Results) -> None:
    assert [verdict.key for verdict in figures.verdicts] == list(Bar)
    assert figures.code_versions  # the dispatcher code each run imported, fingerprinted
    # The correctness lines hold at any N; the timing lines are not asserted.
    assert figures.verdict(Bar.FLOOR_ROWS_EQUAL).passed
    assert figures.verdict(Bar.NOOP_ROWS_WRITTEN).passed
    assert figures.verdict(Bar.NOOP_ROWS_WRITTEN).value == 0
    assert [v.key for v in figures.verdicts if not v.judged] == [
        Bar.RETRY_VS_FLOOR_RETRY,
        Bar.SERVER_CPU_FIRST,
        Bar.SERVER_CPU_NOOP,
    ]


def test_round_trips_grow_with_pages_not_duties(figures: Results) -> None:
    pages = math.ceil(OPTIONS.duties / OPTIONS.chunk_size)
    verdict = figures.verdict(Bar.ROUND_TRIPS)
    assert verdict.passed
    assert verdict.value == figures.first.round_trips
    assert figures.first.round_trips <= ROUND_TRIPS_PER_PAGE_MAX * pages + ROUND_TRIPS_PER_RUN_MAX


def test_first_run_ratio_is_its_time_over_the_floors(figures: Results) -> None:
    verdict = figures.verdict(Bar.FIRST_VS_FLOOR)
    assert verdict.value == pytest.approx(figures.first.seconds / figures.floor.seconds)


def test_figures_survive_the_json_they_are_written_as(figures: Results) -> None:
    written = json.loads(json.dumps(figures.as_json()))
    assert written["first"]["tasks_created"] == figures.first.tasks_created
    assert [v["key"] for v in written["verdicts"]] == [str(key) for key in Bar]
    assert written["parameters"]["mix"] == "classic"


def test_the_table_has_a_line_per_measurement_and_per_bar(figures: Results) -> None:
    lines = render(figures).splitlines()
    # Three header lines, a blank, the column heads, fifteen measurements, a
    # blank, the first run's summary, a blank, the ratio heads, then the bar.
    assert len(lines) == 3 + 1 + 1 + 15 + 1 + 1 + 1 + 1 + len(Bar)


@pytest.fixture(scope="module")
def compliance(server_dsn: str) -> Results:
    """One tiny benchmark run on the compliance mix."""
    return run_benchmark(replace(OPTIONS, mix="compliance"), server_dsn)


def test_the_compliance_mix_has_the_shapes_it_promises(compliance: Results) -> None:
    data = compliance.data
    assert data.mix == "compliance"
    # About a quarter due after the period, a quarter rolled, most with grace
    # or not, and about one active recurring duty in seven held for review.
    assert 0.2 < data.after_period_end / data.duties < 0.3
    assert 0.2 < data.rolled / data.duties < 0.3
    assert 0.5 < data.with_grace / data.duties < 0.7
    assert 0.1 < data.held_for_review / (data.dispatchable + data.held_for_review) < 0.2


def test_the_compliance_mix_dispatches_exactly_the_floors_rows_once(compliance: Results) -> None:
    assert compliance.first.tasks_created > 0
    assert compliance.verdict(Bar.FLOOR_ROWS_EQUAL).passed
    assert compliance.verdict(Bar.NOOP_ROWS_WRITTEN).passed
    assert compliance.backfill_again.tasks_created == 0

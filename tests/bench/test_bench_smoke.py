"""The dispatcher benchmark at a tiny N, so it cannot rot; its timings are not asserted."""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import replace

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from bench.dispatch.benchmark import run_benchmark, run_side_by_side
from bench.dispatch.data import generate
from bench.dispatch.disk import (
    FULL_BENCH,
    SCALE_BENCH,
    DiskTooSmallError,
    Footprint,
    check_disk,
    needed_bytes,
)
from bench.dispatch.dispatcher import ChildRun
from bench.dispatch.floor import FloorRun, prepare_floor_tables
from bench.dispatch.judging import (
    ROUND_TRIPS_PER_PAGE_MAX,
    ROUND_TRIPS_PER_RUN_MAX,
    paired_median,
)
from bench.dispatch.mix import CLASSIC, COMPLIANCE
from bench.dispatch.options import Options
from bench.dispatch.render import render, render_side_by_side, render_week
from bench.dispatch.results import SIDE_BY_SIDE, Bar, Results, SideBySide, side_by_side_row
from bench.dispatch.scale import measure_at
from bench.dispatch.scale_results import ScaleOptions
from bench.dispatch.server import fresh_database, leaves
from dispatch_fn.db.layout import LAYOUTS
from support import session_layout

pytestmark = pytest.mark.slow

# In the session's layout: under DULY_LAYOUT=partitioned the bench runs as
# --layout partitioned does.
OPTIONS = Options(
    duties=2000,
    backfill_duties=300,
    chunk_size=400,
    naive_sample=50,
    trace_round_trips=True,
    mixes=(CLASSIC.name,),
    layouts=(session_layout(),),
)


@pytest.fixture(scope="module")
def side_by_side(server_dsn: str) -> SideBySide:
    """One tiny benchmark run against the test server: classic in full, compliance compared."""
    return run_side_by_side(replace(OPTIONS, mixes=(CLASSIC.name, COMPLIANCE.name)), server_dsn)


@pytest.fixture(scope="module")
def figures(side_by_side: SideBySide) -> Results:
    """The full pass of that run."""
    return side_by_side.full


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
    # Each duty's account is kept in the UPDATE that advances it; on the first
    # run every duty judged in its window has its account written, owing or not,
    # and a duty outside its window has only its next owed day written, once
    # (migration 0014), so later runs pass it over.
    outside = first.report["skipped"]["outside_effective_window"]
    assert first.written.updated["duly_duty"] == first.report["accounts_kept"] + outside
    assert first.report["accounts_kept"] >= first.duties_advanced
    assert figures.floor.written.inserted["floor_task"] == figures.floor.inserted


def test_no_op_runs_write_nothing(figures: Results) -> None:
    for run in (figures.retry, figures.noop, figures.backfill_again):
        assert run.tasks_created == 0
        assert run.written.total == 0
    for floor in (figures.floor_retry, figures.floor_noop):
        assert floor.inserted == floor.advanced == 0


def test_the_first_runs_request_made_dry_before_it_owes_the_same_rows_and_writes_none(
    side_by_side: SideBySide,
) -> None:
    for each in side_by_side.passes:
        dry, first = each.dry, each.first
        assert dry.report["dry_run"] is True
        assert dry.tasks_created == first.tasks_created > 0
        assert dry.duties_advanced == first.duties_advanced
        assert dry.written.total == 0
        # Recorded like every run, yet never the clock the first run counts
        # from: the first run still finds every row to make.
        assert isinstance(dry.report.get("run_id"), int)
        assert first.tasks_existing == 0


def test_the_dry_run_splits_the_first_runs_server_cpu_into_working_out_and_writing(
    side_by_side: SideBySide,
) -> None:
    assert "first run's server CPU" in render(side_by_side.full).splitlines()[-len(Bar) - 3]
    for each in side_by_side.passes:
        split = each.work_split
        dry, first = each.dry.server_cpu_seconds, each.first.server_cpu_seconds
        floor = each.floor.server_cpu_seconds
        if dry is None or first is None or not floor:
            assert split is None
            continue
        assert split is not None
        assert split.working_out == pytest.approx(dry / floor)
        assert split.working_out + split.writing == pytest.approx(first / floor)
        row = side_by_side_row(each)
        assert row["server_cpu_working_out"] == pytest.approx(split.working_out)
        assert row["server_cpu_writing"] == pytest.approx(split.writing)


def test_backfill_creates_then_repeats_nothing(figures: Results) -> None:
    assert figures.backfill.tasks_created > 0
    assert figures.backfill_again.tasks_existing == (
        figures.backfill.tasks_created + figures.backfill.tasks_existing
    )


def test_naive_sample_puts_advanced_duties_back_one_row_at_a_time(figures: Results) -> None:
    naive = figures.naive
    assert naive.sample_duties == 50
    assert naive.first.inserts == naive.first.inserted == naive.sample_tasks > naive.sample_duties
    assert naive.first.refused == 0
    # Each sampled duty was taken back to before the first run, so its UPDATE advances it.
    assert naive.first.updates == naive.first.advanced == naive.sample_duties
    assert naive.noop.refused == naive.sample_tasks
    assert naive.noop.inserted == naive.noop.advanced == 0
    assert naive.empty.inserted == naive.sample_tasks
    assert naive.empty.updates == 0


def test_naive_extrapolation_is_median_statement_times_the_first_runs_rows(
    figures: Results,
) -> None:
    naive = figures.naive
    assert (naive.total_tasks, naive.total_duties) == (
        figures.first.tasks_created,
        figures.first.duties_advanced,
    )
    assert naive.extrapolated_seconds == pytest.approx(
        naive.first.insert_median_ms / 1000 * naive.total_tasks
        + naive.first.update_median_ms / 1000 * naive.total_duties
    )
    assert figures.verdict(Bar.NAIVE_VS_FIRST).value == pytest.approx(
        naive.extrapolated_seconds / figures.first.seconds
    )


def test_disk_is_estimated_from_a_probe_before_generating(figures: Results) -> None:
    disk = figures.disk
    assert disk.footprint.probe_duties == OPTIONS.duties  # the probe never exceeds N
    assert disk.footprint.bytes_per_duty > 0
    assert disk.footprint.bytes_per_task > 0
    # The probe's organisations differ (its backfill share is N/20), its cadences do not.
    assert disk.footprint.tasks_per_duty == pytest.approx(
        figures.first.tasks_created / figures.data.duties, rel=0.1
    )
    assert disk.fits


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
    runs: list[ChildRun | FloorRun] = [
        figures.dry,
        figures.first,
        figures.retry,
        figures.noop,
        figures.backfill,
        figures.tenth_first,
        figures.floor,
        figures.floor_noop,
    ]
    # The whole server's CPU, and the phase's own backends' beside it.
    spent = [run.server_cpu_seconds for run in runs] + [run.backend_cpu_seconds for run in runs]
    assert all((each is not None) is local for each in spent)
    assert all(each is None or each >= 0 for each in spent)
    if local:  # tick-granular (10 ms), but a first run does measurable work
        assert (figures.first.server_cpu_seconds or 0) > 0
        assert (figures.first.backend_cpu_seconds or 0) > 0


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
        Bar.NOOP_VS_FIRST_CPU,
        Bar.WEEK_SERVER_CPU,
        Bar.WEEK_WALL,
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
    again = [each["dispatcher"]["tasks_created"] for each in written["noop_again"]]
    assert again == [each.dispatcher.tasks_created for each in figures.noop_again]
    assert len(written["noop_again"]) == OPTIONS.noop_rounds - 1


def test_the_table_has_a_line_per_measurement_and_per_bar(figures: Results) -> None:
    lines = render(figures).splitlines()
    # Four header lines, a blank, the column heads, seventeen measurements and
    # two for each further no-op round, a blank and the week's table, a blank,
    # the first run's summary and its split, a blank, the ratio heads, then the bar.
    measurements = 17 + 2 * (OPTIONS.noop_rounds - 1)
    assert figures.week is not None
    week = render_week(figures.week)
    assert len(lines) == 4 + 1 + 1 + measurements + 1 + len(week) + 1 + 2 + 1 + 1 + len(Bar)
    assert lines[4 + 1 + 1 + measurements + 1 :][: len(week)] == week


def test_every_no_op_round_writes_nothing_and_the_median_of_their_ratios_is_judged(
    figures: Results,
) -> None:
    rounds = figures.noop_rounds
    assert len(rounds) == OPTIONS.noop_rounds > 1
    assert rounds[0].dispatcher is figures.noop
    assert rounds[0].floor is figures.floor_noop
    for each in rounds:
        assert each.dispatcher.tasks_created == each.dispatcher.written.total == 0
        assert each.floor.inserted == each.floor.written.total == 0
    walls = [(each.dispatcher.seconds, each.floor.seconds) for each in rounds]
    assert figures.verdict(Bar.NOOP_VS_FLOOR_NOOP).value == pytest.approx(paired_median(walls))
    assert "median of 3" in figures.verdict(Bar.NOOP_VS_FLOOR_NOOP).shown


def test_every_run_is_recorded_in_the_ledger_as_the_deployed_function_records_it(
    figures: Results,
) -> None:
    run_ids = [run.report.get("run_id") for run in figures.runs]
    assert all(isinstance(each, int) for each in run_ids)
    # The N/10 run has a database, and so a ledger, of its own.
    assert len(set(run_ids[:-1])) == len(run_ids) - 1


@pytest.fixture(scope="module")
def compliance(server_dsn: str) -> Results:
    """One tiny benchmark run on the compliance mix."""
    return run_benchmark(replace(OPTIONS, mixes=(COMPLIANCE.name,)), server_dsn)


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


# The lines every pass has the figures for; the full pass's own are the rest.
COMPARED_LINES = [key for key in Bar if key not in (Bar.NAIVE_VS_FIRST, Bar.RSS_GROWTH)]


def test_another_mix_is_compared_in_a_pass_of_its_own(side_by_side: SideBySide) -> None:
    (compared,) = side_by_side.compared
    assert (compared.parameters["mix"], compared.parameters["pass"]) == ("compliance", "comparison")
    assert compared.parameters["layout"] == session_layout()
    assert compared.data.mix == "compliance"
    assert compared.data.duties == OPTIONS.duties
    assert compared.first.tasks_created == compared.staged_rows == compared.floor.inserted > 0
    assert [verdict.key for verdict in compared.verdicts] == COMPARED_LINES
    assert compared.verdict(Bar.FLOOR_ROWS_EQUAL).passed
    assert compared.verdict(Bar.NOOP_ROWS_WRITTEN).passed
    # Every pass is judged: the exit status is every judged line of every pass.
    assert side_by_side.passed == all(
        verdict.passed
        for each in side_by_side.passes
        for verdict in each.verdicts
        if verdict.judged
    )


def test_the_side_by_side_table_has_a_row_per_pass(side_by_side: SideBySide) -> None:
    lines = render_side_by_side(side_by_side).splitlines()
    # Two header lines, a blank, the column heads, a row a pass, a blank, the
    # note on bars and goals, a line per judged line failed, then each pass's
    # week: a blank, the pass, its table.
    failed = sum(len(row["failed"]) for row in side_by_side.as_json()["rows"])
    weeks = sum(2 + len(render_week(each.week)) for each in side_by_side.passes if each.week)
    assert len(lines) == 2 + 1 + 1 + 2 + 1 + 1 + failed + weeks
    assert lines[4].split()[:3] == ["classic", session_layout(), "full"]
    assert lines[5].split()[:3] == ["compliance", session_layout(), "comparison"]
    # a0's column: its share of the floor's CPU, or n/a where a CPU was not read.
    end = lines[3].index(" a0 CPU") + len(" a0 CPU")
    for line in lines[4:6]:
        assert re.fullmatch(r"n/a|\d+\.\d\dx", line[end - 7 : end].strip())


def test_the_side_by_side_figures_survive_the_json_they_are_written_as(
    side_by_side: SideBySide,
) -> None:
    written = json.loads(json.dumps(side_by_side.as_json()))
    assert [(row["mix"], row["pass"]) for row in written["rows"]] == [
        ("classic", "full"),
        ("compliance", "comparison"),
    ]
    for row, each in zip(written["rows"], side_by_side.passes, strict=True):
        assert row["tasks_created"] == each.first.tasks_created
        assert row[str(Bar.FIRST_VS_FLOOR)] == pytest.approx(each.verdict(Bar.FIRST_VS_FLOOR).value)
        assert set(map(str, SIDE_BY_SIDE)) <= set(row)
    assert written["passes"][0]["naive"]["sample_duties"] == OPTIONS.naive_sample
    assert "naive" not in written["passes"][1]


GENERATED = 20_000


def _generated_rows(server_dsn: str) -> tuple[str, dict[str, int], dict[str, int], int]:
    """A digest of every generated duty, and its frequencies' and anchors' counts."""
    with (
        fresh_database(server_dsn, "gen") as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        generate(conn, GENERATED, GENERATED // 20, CLASSIC)
        digest = conn.execute(
            "SELECT md5(string_agg(d::text, '|' ORDER BY d.id)) FROM duly_duty d"
        ).fetchone()
        frequencies = conn.execute(
            "SELECT frequency, count(*) FROM duly_duty WHERE form = 'recurring' GROUP BY 1"
        ).fetchall()
        anchors = conn.execute("SELECT due_anchor, count(*) FROM duly_duty GROUP BY 1").fetchall()
        recurring = conn.execute(
            "SELECT count(*) FROM duly_duty WHERE form = 'recurring'"
        ).fetchone()
    assert digest is not None
    assert recurring is not None
    return (
        str(digest[0]),
        {str(name): int(count) for name, count in frequencies},
        {str(name): int(count) for name, count in anchors},
        int(recurring[0]),
    )


def test_the_server_side_generator_writes_the_same_rows_on_every_run(server_dsn: str) -> None:
    assert _generated_rows(server_dsn)[0] == _generated_rows(server_dsn)[0]


def test_the_server_side_generator_draws_each_column_with_the_mixs_weights(
    server_dsn: str,
) -> None:
    _, frequencies, anchors, recurring = _generated_rows(server_dsn)
    forms = dict(CLASSIC.forms)
    assert recurring / GENERATED == pytest.approx(int(forms["recurring"] or 0) / 1000, abs=0.01)
    # 0.02 is over five standard deviations of a share at this N.
    for frequency, weight in CLASSIC.frequencies:
        assert frequencies[str(frequency)] / recurring == pytest.approx(weight / 1000, abs=0.02)
    for anchor, weight in CLASSIC.anchors:
        assert anchors[str(anchor)] / GENERATED == pytest.approx(weight / 1000, abs=0.02)


FOOTPRINT = Footprint(
    probe_duties=1000,
    bytes_per_duty=500.0,
    bytes_per_task=300.0,
    tasks_per_duty=1.7,
    backfill_tasks_per_duty=36.0,
)


def test_the_disk_estimate_grows_with_n_and_with_the_tables_a_bench_keeps() -> None:
    wal = 2**30
    small, large = (needed_bytes(FOOTPRINT, n, n // 20, SCALE_BENCH, wal) for n in (10**6, 10**7))
    assert large - small == pytest.approx(
        9 * (small - needed_bytes(FOOTPRINT, 0, 0, SCALE_BENCH, wal))
    )
    assert needed_bytes(FOOTPRINT, 10**7, 5 * 10**5, FULL_BENCH, wal) > large


def test_a_bench_the_disk_cannot_hold_is_refused_before_it_starts(server_dsn: str) -> None:
    with pytest.raises(DiskTooSmallError, match=r"needs about .* GiB .* has .* GiB free"):
        check_disk(
            server_dsn,
            CLASSIC,
            duties=10**13,
            backfill_duties=0,
            tables=SCALE_BENCH,
            chunk_size=1000,
        )


def test_a_first_run_longer_than_an_invocation_is_completed_by_its_continuation_chain(
    server_dsn: str,
) -> None:
    one = measure_at(server_dsn, 2000, ScaleOptions(duties=2000, chunk_size=200))
    # Pages slowed to half a second each, in invocations of three seconds:
    # ten pages take two links at least, and a link has time for a page
    # after its census. Right after the first measure a link's first 1.6 s
    # went by before its first page here (it read nothing in an invocation
    # of one second, and a chain whose first link cannot move its mark ends).
    chained = measure_at(
        server_dsn,
        2000,
        ScaleOptions(
            duties=2000,
            chunk_size=200,
            invocation_ms=3000,
            reserve_ms=200,
            pause_s=0.5,
            week=False,
        ),
    )
    assert len(one.first.links) == 1
    links = chained.first.links
    assert len(links) > 1
    assert chained.first.complete
    assert [link.report["stopped_by"] for link in links[:-1]] == ["deadline"] * (len(links) - 1)
    # Each link resumes after the gapless mark the one before it handed on.
    for before, after in itertools.pairwise(links):
        assert after.report["resume_after"] == before.report["last_duty_id"]
        assert after.report["continuation"] == before.report["continuation"] + 1
    assert chained.first.tasks_created == one.first.tasks_created > 0
    assert chained.first.duties_advanced == one.first.duties_advanced
    assert chained.noop.tasks_created == chained.noop.duties_advanced == 0
    # The week at scale: each day a chain, each against the floor of its rows.
    assert one.week is not None
    assert chained.week is None
    assert len(one.week.days) == 7
    for day in one.week.days:
        assert day.floor.inserted == day.tasks_created == day.dispatcher.tasks_created


def _shape(conn: psycopg.Connection[tuple[object, ...]], table: str) -> tuple[object, ...]:
    key = conn.execute("SELECT pg_get_partkeydef(%s::regclass)", (table,)).fetchone()
    parts = conn.execute(
        "SELECT pg_get_expr(c.relpartbound, c.oid), c.reloptions FROM pg_class c"
        " WHERE c.relname = ANY(%s) ORDER BY c.relname",
        (leaves(conn, table),),
    ).fetchall()
    uniques = conn.execute(
        "SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass AND indisunique", (table,)
    ).fetchone()
    return key, [tuple(part) for part in parts], uniques


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_floors_tables_are_laid_out_as_the_dispatchers(server_dsn: str, layout: str) -> None:
    with (
        fresh_database(server_dsn, "shape", layout) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        prepare_floor_tables(conn)
        for mine, floor in (("duly_duty", "floor_duty"), ("duly_task", "floor_task")):
            assert _shape(conn, floor) == _shape(conn, mine)
        partitions = len(leaves(conn, "floor_task"))
        assert partitions == (8 if layout == "partitioned" else 1)
        keys = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'floor_task'::regclass AND contype = 'f' AND conparentid = 0"
        ).fetchall()
        assert keys == [
            ("FOREIGN KEY (organization_id, duty_id) REFERENCES floor_duty(organization_id, id)",)
        ]

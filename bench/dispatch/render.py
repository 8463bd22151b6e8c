"""The measurements and the bar as the plain-text tables ``make bench`` prints."""

from __future__ import annotations

import math

from bench.dispatch.disk import DiskCheck
from bench.dispatch.dispatcher import ChildRun
from bench.dispatch.judging import (
    FIRST_VS_FLOOR_MAX,
    GOAL,
    NOOP_VS_FIRST_CPU_GOAL,
    NOOP_VS_FLOOR_NOOP_MAX,
    SERVER_CPU_FIRST_GOAL,
    SERVER_CPU_NOOP_GOAL,
    WEEK_SERVER_CPU_GOAL,
    WEEK_WALL_GOAL,
)
from bench.dispatch.readings import Written
from bench.dispatch.results import (
    SIDE_BY_SIDE,
    WEEK_SIDE_BY_SIDE,
    Bar,
    Pass,
    Results,
    SideBySide,
    Verdict,
    side_by_side_row,
)
from bench.dispatch.week import Week


def render(results: Results) -> str:
    """The measurements and the bar as a plain-text table."""
    data, p = results.data, results.parameters
    lines = [
        f"dispatch benchmark: N={data.duties:,} duties ({data.dispatchable:,} dispatchable, "
        f"{data.cadences:,} distinct cadences ({data.cadences_without_lead:,} without the lead), "
        f"{data.organisations:,} organisations, "
        f"{data.owners:,} owners), chunk {p['chunk_size']:,}, "
        f"{p['workers']} dispatcher connection(s), clock {p['clock']}, "
        f"{p.get('layout', 'plain')} layout"
        + (
            ""
            if data.mix == "classic"
            else f"; {data.mix} mix: {data.after_period_end:,} due after the period, "
            f"{data.rolled:,} rolled to a business day, {data.with_grace:,} with grace, "
            f"{data.held_for_review:,} held by the review gate"
        ),
        f"PostgreSQL {results.server['version']} ({results.server['where']}), "
        f"{p['cpus']} CPUs, generated in {data.seconds:.1f} s, dispatcher "
        + (
            "connections as behind RDS Proxy (prepare nothing)"
            if p["rds_proxy"]
            else "connections with psycopg's prepare threshold (page statements are never prepared)"
        )
        + ("" if results.settled else "; CHECKPOINT refused, phases not settled"),
        disk_line(results.disk),
        f"dispatcher code {', '.join(results.code_versions)}"
        + (
            "  WARNING: the code changed during the run; figures mix versions"
            if len(results.code_versions) > 1
            else ""
        ),
        "",
        f"{'measurement':<48} {'seconds':>9} {'srv CPU':>8} {'rows':>11} {'trips':>7} "
        f"{'RSS MiB':>8}  rows written (ins + upd)",
    ]

    def child(label: str, run: ChildRun) -> str:
        return (
            f"{label:<48} {run.seconds:>9.2f} {_cpu_text(run.server_cpu_seconds):>8} "
            f"{run.tasks_created:>11,} {run.round_trips:>7,} "
            f"{run.rss_peak_mib:>8.1f}  {_written_text(run.written)}"
        )

    def plain(  # noqa: PLR0917 - one per column
        label: str, seconds: float, rows: int, trips: str = "", note: str = "", cpu: str = ""
    ) -> str:
        return f"{label:<48} {seconds:>9.2f} {cpu:>8} {rows:>11,} {trips:>7} {'':>8}  {note}"

    floor, floor_noop, naive = results.floor, results.floor_noop, results.naive
    backfill_label = f"{p['backfill_duties']:,}-duty organisation"
    lines += [
        child("a0 the first run's request, dry (writes nothing)", results.dry),
        child("a  first scheduled run", results.first),
        child("b0 no-op re-run at once", results.retry),
        child("b  no-op re-run, tables vacuumed", results.noop),
        child(f"c1 backfill 13 months, {backfill_label}", results.backfill),
        child("c2 backfill again (no-op)", results.backfill_again),
        plain("d1 floor: INSERT ... SELECT + UPDATE", floor.seconds, floor.inserted, "4",
              _written_text(floor.written), _cpu_text(floor.server_cpu_seconds)),
        plain("     INSERT ... ON CONFLICT DO NOTHING", floor.insert_seconds, floor.inserted),
        plain("     UPDATE last_dispatched_period", floor.update_seconds, floor.advanced),
        plain("d0 floor no-op at once", results.floor_retry.seconds,
              results.floor_retry.inserted, "4", _written_text(results.floor_retry.written),
              _cpu_text(results.floor_retry.server_cpu_seconds)),
        plain("d2 floor no-op, tables vacuumed", floor_noop.seconds, floor_noop.inserted, "4",
              _written_text(floor_noop.written), _cpu_text(floor_noop.server_cpu_seconds)),
        *(line
          for number, again in enumerate(results.noop_again, start=2)
          for line in (
              child(f"b  no-op, round {number}", again.dispatcher),
              plain(f"d2 floor no-op, round {number}", again.floor.seconds, again.floor.inserted,
                    "4", _written_text(again.floor.written),
                    _cpu_text(again.floor.server_cpu_seconds)),
          )),
        plain(f"e1 naive: {naive.sample_duties:,} duties' {naive.first.inserts:,} INSERTs"
              f" + {naive.first.updates:,} UPDATEs", naive.first.seconds, naive.first.inserted,
              f"{naive.first.inserts + naive.first.updates:,}",
              "one by one into the full-size floor tables, spread over the id range"),
        plain(f"     median {naive.first.insert_median_ms:.3f} ms x {naive.total_tasks:,} tasks"
              f" + {naive.first.update_median_ms:.3f} ms x {naive.total_duties:,} duties",
              naive.extrapolated_seconds, results.staged_rows,
              f"{naive.total_tasks + naive.total_duties:,}",
              f"extrapolated (from the means: {naive.mean_extrapolated_seconds:.1f} s)"),
        plain("e2 naive no-op: the same again", naive.noop.seconds, 0,
              f"{naive.noop.inserts + naive.noop.updates:,}",
              f"{naive.noop.refused:,} unique violations caught, {naive.noop.advanced} advanced"),
        plain(f"     median {naive.noop.insert_median_ms:.3f} ms x {naive.total_tasks:,} tasks"
              f" + {naive.noop.update_median_ms:.3f} ms x {naive.total_duties:,} duties",
              naive.noop_extrapolated_seconds, 0, f"{naive.total_tasks + naive.total_duties:,}"),
        plain(f"e0 the same INSERTs into an empty table: median {naive.empty.insert_median_ms:.3f}"
              " ms", naive.empty_extrapolated_seconds, 0, f"{naive.total_tasks:,}",
              "x the first run's tasks, no UPDATEs: what a sample of an empty table claims"),
        child(f"f  first run at N/10 ({results.tenth_data.duties:,} duties, fresh db)",
              results.tenth_first),
    ]  # fmt: skip
    if results.week is not None:
        lines += ["", *render_week(results.week)]
    first = results.first
    lines += [
        "",
        f"first run: {first.pages:,} pages, {first.statements:,} statements + "
        f"{first.transactions:,} transactions x 2 + {first.prepared} prepares = "
        f"{first.round_trips:,} round trips; {first.duties_advanced:,} duties advanced; "
        f"baseline RSS {first.rss_baseline_mib:.1f} MiB; process {first.process_seconds:.1f} s",
        split_line(results),
        "",
        f"{'ratio':<40} {'value':>34}  {'bar':<30} verdict",
    ]
    lines += [
        f"{v.name:<40} {v.shown:>34}  {v.bar:<30} {verdict_word(v)}" for v in results.verdicts
    ]
    return "\n".join(lines)


def render_side_by_side(side: SideBySide) -> str:
    """One row per (mix, layout): the ratios against the floor, round trips, RSS, tasks."""
    p = side.full.parameters
    lines = [
        f"side by side: N={p['duties']:,} duties, chunk {p['chunk_size']:,}, "
        f"{p['workers']} dispatcher connection(s), clock {p['clock']}; each (mix, layout) "
        "generated alike in a fresh database of its own on the same server, one after another",
        f"dispatcher code {', '.join(side.code_versions)}"
        + (
            "  WARNING: the code changed during the run; figures mix versions"
            if len(side.code_versions) > 1
            else ""
        ),
        "",
        f"{'mix':<11} {'layout':<12} {'pass':<10} {'first/floor':>13} {'srv CPU first':>14} "
        f"{'no-op/floor':>13} {'srv CPU no-op':>14} {'no-op/first':>15} {'week CPU':>16} "
        f"{'week wall':>16} {'a0 CPU':>7} {'trips':>6} {'RSS MiB':>8} {'tasks created':>13} "
        f"{'week tasks':>10}  bar",
    ]
    for each in side.passes:
        row = side_by_side_row(each)
        cells = [_ratio_cell(each.verdict(key)) for key in SIDE_BY_SIDE[:4]]
        share = _share_cell(each.verdict(Bar.NOOP_VS_FIRST_CPU))
        week = (
            ["skipped", "skipped"]
            if each.week is None
            else [_ratio_cell(each.verdict(key)) for key in WEEK_SIDE_BY_SIDE]
        )
        week_tasks = "" if each.week is None else f"{each.week.tasks_created:,}"
        working_out = row["server_cpu_working_out"]
        dry = "n/a" if working_out is None else _times(working_out)
        failed = row["failed"]
        lines.append(
            f"{row['mix']:<11} {row['layout']:<12} {row['pass']:<10} {cells[0]:>13} "
            f"{cells[1]:>14} {cells[2]:>13} {cells[3]:>14} {share:>15} {week[0]:>16} "
            f"{week[1]:>16} {dry:>7} {row['round_trips']:>6,} "
            f"{row['rss_peak_mib']:>8.1f} {row['tasks_created']:>13,} {week_tasks:>10}  "
            + (f"FAIL ({len(failed)})" if failed else "PASS")
        )
    lines += [
        "",
        f"bar (judged, with each pass's other lines): first/floor <= {FIRST_VS_FLOOR_MAX}x, "
        f"no-op/floor no-op <= {NOOP_VS_FLOOR_NOOP_MAX}x; goals (information): the whole "
        f"server's CPU against the floor's, first <= {SERVER_CPU_FIRST_GOAL:.2f}x, "
        f"no-op <= {SERVER_CPU_NOOP_GOAL:.2f}x, the week <= {WEEK_SERVER_CPU_GOAL:.2f}x "
        f"(wall <= {WEEK_WALL_GOAL:.2f}x); no-op/first: the no-op's server CPU against the "
        f"first run's, <= {NOOP_VS_FIRST_CPU_GOAL:.0%}; a0 CPU: the first run's request made dry "
        "first, its server CPU against the floor's (the working out the floor skips)",
    ]
    lines += [
        f"{each.parameters['mix']}, {each.parameters['layout']}: {v.name} {v.shown}, bar {v.bar}"
        for each in side.passes
        for v in each.verdicts
        if v.judged and not v.passed
    ]
    for each in side.passes:
        if each.week is not None:
            lines += ["", f"{each.parameters['mix']}, {each.parameters['layout']}:",
                      *render_week(each.week)]  # fmt: skip
    return "\n".join(lines)


def render_week(week: Week) -> list[str]:
    """The week's days, each against its floor, and their sums, as lines of a table."""
    lines = [
        f"the week: {len(week.days)} daily runs at the clock + 1 to {len(week.days)} days, each "
        "after VACUUM (ANALYZE), against the floor of its own rows",
        f"{'day':<4} {'clock':<26} {'tasks':>9} {'duties':>9} {'seconds':>8} {'srv CPU':>8} "
        f"{'floor s':>8} {'flr CPU':>8} {'CPU/floor':>9} {'wall/floor':>10} {'CPU ms/task':>11}",
    ]
    for number, day in enumerate(week.days, start=1):
        cpu = day.dispatcher.server_cpu_seconds
        per_task = "n/a" if cpu is None or not day.tasks_created else (
            f"{cpu * 1000 / day.tasks_created:.3f}")  # fmt: skip
        lines.append(
            f"{number:<4} {day.clock:<26} {day.tasks_created:>9,} {day.duties_written:>9,} "
            f"{day.dispatcher.seconds:>8.2f} {_cpu_text(cpu):>8} {day.floor.seconds:>8.2f} "
            f"{_cpu_text(day.floor.server_cpu_seconds):>8} {_plain_times(day.server_cpu_ratio):>9} "
            f"{_plain_times(day.wall_ratio):>10} {per_task:>11}"
            + ("  clock ahead of the wall clock" if day.ahead_of_wall_clock else "")
        )
    lines.append(
        f"{'week':<31} {week.tasks_created:>9,} {sum(d.duties_written for d in week.days):>9,} "
        f"{week.seconds:>8.2f} {_cpu_text(week.server_cpu_seconds):>8} "
        f"{week.floor_seconds:>8.2f} {_cpu_text(week.floor_server_cpu_seconds):>8} "
        f"{_plain_times(week.server_cpu_ratio):>9} {_plain_times(week.wall_ratio):>10} "
        f"{week.server_cpu_ms_per_task:>11.3f}"
    )
    if week.ahead_of_wall_clock:
        lines.append(
            f"WARNING: day(s) {', '.join(map(str, week.ahead_of_wall_clock))} ran at a clock the "
            "wall clock had not reached: the dispatcher takes such a run for a manual run at a "
            "future clock, which keeps no account (docs/contract.md#account)"
        )
    return lines


def split_line(measured: Pass) -> str:
    """The first run's server CPU against the floor's, split by a0 into working out and writing."""
    split = measured.work_split
    if split is None:
        return "first run's server CPU split by a0: n/a (a CPU not read)"
    return (
        f"first run's server CPU against the floor's, split by a0: working the rows out "
        f"{_times(split.working_out)} ({split.working_out_seconds:.2f} s), writing them "
        f"{_times(split.writing)} ({split.writing_seconds:.2f} s)"
    )


def _times(value: float) -> str:
    return f"{value:.2f}x"


def _plain_times(value: float) -> str:
    return "n/a" if math.isnan(value) else _times(value)


def _share_cell(verdict: Verdict) -> str:
    if math.isnan(verdict.value):
        return "n/a"
    return f"{verdict.value:.1%} {verdict_word(verdict)}"


def _ratio_cell(verdict: Verdict) -> str:
    if math.isnan(verdict.value):
        return "n/a"
    return f"{verdict.value:.2f}x {verdict_word(verdict)}"


def verdict_word(verdict: Verdict) -> str:
    """PASS or FAIL on the bar; met or missed for a goal; over for information past its mark."""
    if verdict.bar.startswith(GOAL):
        return "n/a" if math.isnan(verdict.value) else "met" if verdict.passed else "missed"
    return "PASS" if verdict.passed else "FAIL" if verdict.judged else "over"


def disk_line(disk: DiskCheck) -> str:
    """The disk estimate at N against the free space, as one line."""
    fp = disk.footprint
    free = (
        "free space not readable here"
        if disk.free_bytes is None
        else f"{disk.free_bytes / 2**30:.1f} GiB free in {disk.data_directory}"
    )
    return (
        f"disk: about {disk.needed_bytes / 2**30:.2f} GiB needed ({fp.bytes_per_duty:.0f} B a "
        f"duty, {fp.bytes_per_task:.0f} B a task, {fp.tasks_per_duty:.2f} tasks a duty, "
        f"measured on {fp.probe_duties:,} duties), {free}"
    )


def _cpu_text(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.2f}"


def _written_text(written: Written) -> str:
    return ", ".join(
        f"{table} {written.inserted[table]:,} + {written.updated[table]:,}"
        for table in written.inserted
    )

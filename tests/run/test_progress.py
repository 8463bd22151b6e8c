"""Progress you can watch: one snapshot per committed page, logged as "run progress"."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from dispatch_fn.aws import parse_event
from dispatch_fn.run import Progress, ProgressMeter, dispatch, throttled
from runtimes import runtime
from support import CLOCK, Conn, Invoke, duty, insert_duties


class Ticks:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _snapshot(done: int, total: int = 10, elapsed: float = 4.0) -> Progress:
    return Progress(done, total, tasks_created=0, tasks_existing=0, pages=1, elapsed_s=elapsed)


def test_the_estimate_of_time_left_follows_the_pace_so_far() -> None:
    assert _snapshot(4, 10, elapsed=8.0).remaining_s == pytest.approx(12.0)
    assert _snapshot(0).remaining_s is None
    assert _snapshot(10).remaining_s == 0
    assert _snapshot(10).finished


def test_a_snapshot_logs_as_plain_fields() -> None:
    line = Progress(3, 12, tasks_created=5, tasks_existing=1, pages=2, elapsed_s=1.04).as_log()
    assert line == {
        "duties_done": 3, "duties_total": 12, "percent": 25.0, "tasks_created": 5,
        "tasks_existing": 1, "pages": 2, "elapsed_s": 1.0, "remaining_s": 3.1,
    }  # fmt: skip
    assert Progress(0, 0, 0, 0, 0, 0.0).as_log()["percent"] == 100.0


def test_the_meter_adds_up_pages_and_never_shows_more_than_the_total() -> None:
    ticks = Ticks()
    seen: list[Progress] = []
    meter = ProgressMeter(5, seen.append, clock=ticks)
    ticks.now += 2
    meter.page(duties=3, tasks_created=6, tasks_existing=0)
    ticks.now += 2
    meter.page(duties=3, tasks_created=7, tasks_existing=4)  # a duty added mid-run
    meter.page(duties=0, tasks_created=7, tasks_existing=4)  # the empty page ending the walk
    assert [(p.duties_done, p.pages, p.tasks_created, p.elapsed_s) for p in seen] == [
        (3, 1, 6, 2.0),
        (5, 2, 7, 4.0),
    ]


def test_throttling_keeps_the_first_the_last_and_one_line_per_interval() -> None:
    ticks = Ticks()
    kept: list[int] = []
    report = throttled(lambda p: kept.append(p.duties_done), every_s=5.0, clock=ticks)
    for done, at in [(1, 0), (2, 1), (3, 4.9), (4, 5.0), (5, 6), (6, 11), (7, 11.5), (10, 12)]:
        ticks.now = 100.0 + at
        report(_snapshot(done))
    assert kept == [1, 4, 6, 10]


@pytest.mark.parametrize("workers", [1, 3])
def test_the_run_reports_after_each_committed_page(
    conn: Conn, helpers: list[Conn], workers: int
) -> None:
    insert_duties(
        conn,
        [duty(f"d{n}") for n in range(5)]
        + [duty("mars", timezone="Mars/Olympus"), duty("paused", status="paused")],
    )
    request = parse_event({"now": CLOCK}, current_time=datetime.now().astimezone())
    seen: list[Progress] = []
    report = dispatch(
        [conn, *helpers[: workers - 1]], request, runtime(chunk_size=2, on_progress=seen.append)
    )
    # The total is what the run dispatches: neither the faulty nor the paused duty.
    assert {p.duties_total for p in seen} == {5}
    done = [p.duties_done for p in seen]
    assert done == sorted(done)
    assert done[-1] == 5
    if workers == 1:  # pages in id order: d0-d1, d2-d3, d4 and mars
        assert done == [2, 4, 5]
    assert seen[-1].finished
    assert seen[-1].tasks_created == report.tasks_created == 5
    assert [p.pages for p in seen] == list(range(1, len(seen) + 1))


def test_a_run_with_nothing_to_dispatch_reports_nothing(conn: Conn) -> None:
    request = parse_event({"now": CLOCK}, current_time=datetime.now().astimezone())
    seen: list[Progress] = []
    dispatch([conn], request, runtime(on_progress=seen.append))
    assert seen == []


def test_a_long_run_logs_how_far_it_got(
    conn: Conn, invoke: Invoke, capfd: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(5)])
    capfd.readouterr()
    invoke({"from": "2026-01-01", "to": "2026-03-31", "now": CLOCK}, chunk_size=2, workers=1)
    lines = [
        json.loads(line) for line in capfd.readouterr().err.splitlines() if line.startswith("{")
    ]
    progress = [line for line in lines if line["message"] == "run progress"]
    # Three pages inside the throttle's five seconds: the first and the last are logged.
    assert [(p["duties_done"], p["duties_total"]) for p in progress] == [(2, 5), (5, 5)]
    last = progress[-1]
    assert (last["tasks_created"], last["percent"], last["remaining_s"]) == (15, 100.0, 0.0)
    assert last["mode"] == "backfill"
    assert {"elapsed_s", "pages", "tasks_existing", "function_request_id"} <= last.keys()

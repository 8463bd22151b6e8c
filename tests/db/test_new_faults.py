"""``NewFaults``: the duties whose fault began in this run, kept on the duties' account.

The stack's Degraded alarm watches it, so one duty that stays broken does not
keep the alarm in ALARM and mute the next broken duty. Each faulted duty has a
row in ``duly_dispatch_fault`` (migration 0013) from the run its fault began
in until a run dispatches it again (``db.faults``): the count is exact
whatever the number of faults and however often an event is delivered.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from aws_lambda_powertools import Metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import errors as pg_errors

from dispatch_fn.db import dispatch_page, faults, ledger
from dispatch_fn.planning import FAULT_REASONS, Fault, RunRequest, Scope, Window
from dispatch_fn.run import FAULT_LIST_LIMIT, dispatch_recorded
from runtimes import runtime
from support import Conn, Invoke, duty, insert_duties

_DAY_1 = datetime(2026, 8, 21, 1, tzinfo=UTC)
_BROKEN = {"timezone": "Mars/Olympus"}


def _at(day: int) -> datetime:
    return _DAY_1 + timedelta(days=day)


def _scheduled(day: int) -> dict[str, Any]:
    return {"scheduled_time": _at(day).isoformat().replace("+00:00", "Z")}


def _new_faults_published(
    invoke: Invoke, event: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> float | None:
    metrics = Metrics(namespace="Duly", service="duly-dispatcher")
    invoke(event, metrics=metrics)
    metrics.flush_metrics()
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    if not blobs or "NewFaults" not in blobs[-1]:
        return None
    value = blobs[-1]["NewFaults"]
    return float(value[-1] if isinstance(value, list) else value)


def _account(conn: Conn) -> dict[str, tuple[datetime, int]]:
    """Every duty on the fault account, with the clock and the run its fault began in."""
    rows = conn.execute("SELECT duty_id, since, since_run FROM duly_dispatch_fault").fetchall()
    return {str(duty_id): (since, int(run)) for duty_id, since, run in rows}


@pytest.fixture(autouse=True)
def _metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")


# --- through the handler, as the alarm sees it -------------------------------


def test_a_duty_that_stays_broken_is_new_once_and_a_second_broken_duty_is_new_again(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("good"), duty("broken-1", **_BROKEN)])
    # Nothing on account yet: the first run's fault is new.
    assert _new_faults_published(invoke, _scheduled(0), capsys) == 1
    # The same duty still broken the next day: nothing new, the alarm goes OK.
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 0
    insert_duties(conn, [duty("broken-2", **_BROKEN)])
    # A second broken duty beside the first: one new fault, the alarm fires again.
    assert _new_faults_published(invoke, _scheduled(2), capsys) == 1
    assert _new_faults_published(invoke, _scheduled(3), capsys) == 0


def test_a_duty_mended_then_broken_again_is_new_again(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("flaky", **_BROKEN)])
    assert _new_faults_published(invoke, _scheduled(0), capsys) == 1
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'flaky'")
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 0
    conn.execute("UPDATE duly_duty SET timezone = 'Mars/Olympus' WHERE id = 'flaky'")
    assert _new_faults_published(invoke, _scheduled(2), capsys) == 1


def test_a_backfill_keeps_the_account_so_its_new_fault_is_not_new_again_at_the_next_run(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN)])
    backfill = {"now": _DAY_1.isoformat(), "from": "2026-01-01", "to": "2026-06-30"}
    # The backfill found the fault first: the alarm fired then, and not again.
    assert _new_faults_published(invoke, backfill, capsys) == 1
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 0


def test_a_dry_run_keeps_no_account_so_the_next_run_finds_its_faults_new(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN)])
    invoke({"now": _DAY_1.isoformat(), "dry_run": True})
    capsys.readouterr()
    assert _account(conn) == {}
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 1


def test_a_dry_run_publishes_no_new_faults(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN)])
    dry_run = {"now": _DAY_1.isoformat(), "dry_run": True}
    assert _new_faults_published(invoke, dry_run, capsys) is None


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(_BROKEN, id="refused-group"),
        pytest.param({"form": "recurrent"}, id="unknown-form"),
        pytest.param({"due_roll": "sideways"}, id="refused-due-rule"),
        pytest.param({"due_offset_months": 3}, id="offsets-out-of-range"),
    ],
)
def test_a_longer_list_of_faults_than_a_report_holds_still_counts_each_added_duty(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str], broken: dict[str, Any]
) -> None:
    insert_duties(conn, [duty(f"bad-{n:03d}", **broken) for n in range(FAULT_LIST_LIMIT + 20)])
    assert _new_faults_published(invoke, _scheduled(0), capsys) == FAULT_LIST_LIMIT + 20
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 0
    # Sorting after every listed fault: neither report lists them.
    insert_duties(conn, [duty("bad-new-1", **broken), duty("bad-new-2", **broken)])
    assert _new_faults_published(invoke, _scheduled(2), capsys) == 2
    assert len(_account(conn)) == FAULT_LIST_LIMIT + 22


def test_a_duty_mended_and_another_broken_behind_a_full_fault_list_is_one_new_fault(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 37, defect 6: one more fault than a report lists, for two days.
    broken = [duty(f"mars-{n:03d}", **_BROKEN) for n in range(FAULT_LIST_LIMIT + 1)]
    insert_duties(conn, broken)
    assert _new_faults_published(invoke, _scheduled(0), capsys) == FAULT_LIST_LIMIT + 1
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 0
    # As many faults as the day before, one of them another duty's.
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'mars-000'")
    insert_duties(conn, [duty("mars-new", **_BROKEN)])
    assert _new_faults_published(invoke, _scheduled(2), capsys) == 1


def test_a_redelivered_event_neither_hides_nor_repeats_a_new_fault(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 37, defect 6: EventBridge delivers an event again (a Lambda retry):
    # two ledger rows at one clock.
    broken = [duty(f"mars-{n:03d}", **_BROKEN) for n in range(FAULT_LIST_LIMIT + 20)]
    insert_duties(conn, broken)
    assert _new_faults_published(invoke, _scheduled(0), capsys) == FAULT_LIST_LIMIT + 20
    assert _new_faults_published(invoke, _scheduled(0), capsys) == 0
    insert_duties(conn, [duty("mars-new", **_BROKEN)])
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 1


def test_when_the_account_cannot_be_kept_every_fault_counts_as_new_and_a_warning_says_why(
    conn: Conn,
    invoke: Invoke,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    insert_duties(conn, [duty("broken-1", **_BROKEN), duty("broken-2", **_BROKEN)])
    assert _new_faults_published(invoke, _scheduled(0), capsys) == 2
    conn.execute("ALTER TABLE duly_dispatch_fault RENAME TO duly_dispatch_fault_gone")
    with caplog.at_level(logging.WARNING, logger="duly.faults"):
        # An alarm once too often beats a new broken duty nobody hears of.
        assert _new_faults_published(invoke, _scheduled(1), capsys) == 2
    (warning,) = [r for r in caplog.records if r.name == "duly.faults"]
    assert "all 2 counted as new" in warning.getMessage()
    assert "UndefinedTable" in warning.getMessage()


# --- the account a run keeps --------------------------------------------------


def _run(conn: Conn, day: int, **request: Any) -> int | None:
    """A recorded run at day ``day``'s clock; the faults that began in it."""
    outcome = dispatch_recorded([conn], RunRequest(now=_at(day), **request))
    return outcome.new_faults


def test_a_fault_keeps_the_clock_and_the_run_it_began_in_until_the_duty_is_mended(
    conn: Conn,
) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN), duty("good")])
    assert _run(conn, 0) == 1
    ((began, first_run),) = _account(conn).values()
    assert began == _at(0)
    assert _run(conn, 1) == 0
    assert _account(conn) == {"broken": (_at(0), first_run)}
    (row,) = conn.execute("SELECT reason, detail FROM duly_dispatch_fault").fetchall()
    assert row[0] == "invalid_cadence"
    assert "Mars/Olympus" in row[1]
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'broken'")
    assert _run(conn, 2) == 0
    assert _account(conn) == {}


def test_a_dry_run_neither_adds_nor_removes_a_fault(conn: Conn) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN), duty("mended", **_BROKEN)])
    _run(conn, 0)
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'mended'")
    insert_duties(conn, [duty("broken-2", **_BROKEN)])
    assert _run(conn, 1, dry_run=True) is None
    assert set(_account(conn)) == {"broken", "mended"}


def test_a_deleted_duty_leaves_the_account_at_the_next_complete_run(conn: Conn) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN)])
    _run(conn, 0)
    conn.execute("DELETE FROM duly_duty WHERE id = 'broken'")
    _run(conn, 1)
    assert _account(conn) == {}


def test_a_scoped_run_keeps_the_account_of_its_own_scope_only(conn: Conn) -> None:
    insert_duties(
        conn,
        [
            duty("a-broken", organization_id="org-a", **_BROKEN),
            duty("b-broken", organization_id="org-b", **_BROKEN),
        ],
    )
    assert _run(conn, 0) == 2
    conn.execute("UPDATE duly_duty SET timezone = 'UTC'")
    insert_duties(
        conn,
        [
            duty("a-new", organization_id="org-a", **_BROKEN),
            duty("b-new", organization_id="org-b", **_BROKEN),
        ],
    )
    # org-a's run: its mended duty leaves, its new fault is counted; org-b's stay as they were.
    assert _run(conn, 1, scope=Scope(organization_id="org-a")) == 1
    assert set(_account(conn)) == {"a-new", "b-broken"}
    assert _run(conn, 1, scope=Scope(duty_ids=("b-new",))) == 1
    assert set(_account(conn)) == {"a-new", "b-broken", "b-new"}


def test_a_run_stopped_early_removes_only_the_faults_up_to_its_gapless_mark_and_a_chain_counts_each_new_fault_once(  # noqa: E501 - the behaviour is the name
    conn: Conn,
) -> None:
    insert_duties(conn, [duty(f"d{n:03d}", **_BROKEN) for n in range(6)])
    assert _run(conn, 0) == 6
    conn.execute("UPDATE duly_duty SET timezone = 'UTC'")
    insert_duties(conn, [duty("d999", **_BROKEN)])
    pages: list[bool] = []

    def after_one_page() -> bool:
        pages.append(True)
        return len(pages) > 1

    first = dispatch_recorded(
        [conn],
        RunRequest(now=_at(1)),
        runtime(chunk_size=2, workers=1, should_stop=after_one_page),
    )
    assert (first.report.complete, first.report.last_duty_id) == (False, "d001")
    # The duties past the mark were not judged: not the new fault either.
    assert first.new_faults == 0
    assert set(_account(conn)) == {"d002", "d003", "d004", "d005"}
    # Its continuation judges the rest, and finds the new fault.
    assert _run(conn, 1, scope=Scope(resume_after="d001"), continuation=1) == 1
    assert set(_account(conn)) == {"d999"}


def _judged(faulted: list[str], *, set_aside: tuple[str, ...] = ()) -> faults.Judged:
    return faults.Judged(
        clock=_DAY_1,
        scope=Scope(),
        faults=[Fault(duty_id, "invalid_cadence", "bad") for duty_id in faulted],
        complete=True,
        upto=None,
        set_aside=[Fault(duty_id, "locked") for duty_id in set_aside],
    )


def _ledger_run(conn: Conn) -> int:
    request = RunRequest(now=_DAY_1)
    return ledger.start(conn, request, request_id=None, continues_run=None)


def test_a_duty_set_aside_keeps_its_fault_on_account(conn: Conn) -> None:
    insert_duties(conn, [duty("locked")])
    assert faults.record(conn, _ledger_run(conn), _judged(["locked"])) == 1
    # Its row was locked elsewhere: the run never judged its values.
    assert faults.record(conn, _ledger_run(conn), _judged([], set_aside=("locked",))) == 0
    assert set(_account(conn)) == {"locked"}
    assert faults.record(conn, _ledger_run(conn), _judged([])) == 0
    assert _account(conn) == {}


@pytest.mark.parametrize("reason", FAULT_REASONS)
def test_the_account_takes_every_fault_reason_of_the_contract(conn: Conn, reason: str) -> None:
    insert_duties(conn, [duty("d1")])
    run_id = _ledger_run(conn)
    judged = faults.Judged(_DAY_1, Scope(), [Fault("d1", reason, "x")], complete=True, upto=None)
    assert faults.record(conn, run_id, judged) == 1


def test_the_account_refuses_a_reason_that_is_no_fault(conn: Conn) -> None:
    run_id = _ledger_run(conn)
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute(
            "INSERT INTO duly_dispatch_fault VALUES ('o', 'd', 'nothing_due', '', now(), %s)",
            (run_id,),
        )


_FAULT_SETS = st.lists(st.integers(0, 160), unique=True, max_size=140)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=_FAULT_SETS, now=_FAULT_SETS, shuffle=st.randoms(use_true_random=False))
def test_new_faults_are_exactly_the_duties_faulted_now_and_not_before_whatever_their_number(
    conn: Conn, before: list[int], now: list[int], shuffle: Any
) -> None:
    if conn.execute("SELECT count(*) FROM duly_duty").fetchone() == (0,):
        insert_duties(conn, [duty(f"d{n:03d}") for n in range(161)])  # once for every example
    conn.execute("DELETE FROM duly_dispatch_fault")
    ids_before = [f"d{n:03d}" for n in before]
    ids_now = [f"d{n:03d}" for n in now]
    shuffle.shuffle(ids_now)
    assert faults.record(conn, _ledger_run(conn), _judged(ids_before)) == len(ids_before)
    counted = faults.record(conn, _ledger_run(conn), _judged(ids_now))
    assert counted == len(set(ids_now) - set(ids_before))
    assert set(_account(conn)) == set(ids_now)


def test_a_judgement_made_before_a_later_run_that_completed_first_changes_nothing(
    conn: Conn,
) -> None:
    # One event delivered twice: delivery A judges x broken before its pages
    # and waits on them; x is mended, and delivery B, started after A, runs
    # whole and ends x's fault. A's judgement, older than B's, comes last.
    insert_duties(conn, [duty("x"), duty("y")])
    assert faults.record(conn, _ledger_run(conn), _judged(["x"])) == 1
    stale, fresh = _ledger_run(conn), _ledger_run(conn)
    ledger.finish(conn, fresh, "completed", {})
    assert faults.record(conn, fresh, _judged(["y"])) == 1
    ledger.finish(conn, stale, "completed", {})

    # Before: x back on account since A (1 new fault for a redelivery), y gone.
    assert faults.record(conn, stale, _judged(["x"])) == 0
    assert set(_account(conn)) == {"y"}


def test_a_fault_mended_and_dispatched_in_the_run_that_found_it_is_new_again_when_broken_again(
    conn: Conn, db_url: str
) -> None:
    # A monthly duty (lead 7) the run plans as broken (Mars/Olympus): a fault
    # of the run. An edit mends it into a group the run planned just before
    # its first page, so the same run also dispatches it as it now reads
    # (docs/contract.md#account): its account moves, dispatch_next_at with it,
    # to 11-24. The run of 11-21 judges it fine; broken again by an edit after
    # that run, the run of 11-22 finds a fault that began there.
    insert_duties(conn, [duty("good"), duty("flaky", **_BROKEN)])
    at = datetime(2026, 11, 20, 1, tzinfo=UTC)
    edits = ["UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'flaky'"]

    def page(*args: Any, **kwargs: Any) -> Any:
        while edits:
            with psycopg.connect(db_url, autocommit=True) as editor:
                editor.execute(edits.pop())
        return dispatch_page(*args, **kwargs)

    mending = replace(runtime(), dispatch_page=page)
    first = dispatch_recorded([conn], RunRequest(now=at), mending)
    assert [each.duty_id for each in first.report.faults] == ["flaky"]
    assert first.report.tasks_created == 2
    # The next day: the duty is mended and on no fault's account.
    dispatch_recorded([conn], RunRequest(now=at + timedelta(days=1)))
    mended = _account(conn)
    conn.execute("UPDATE duly_duty SET timezone = 'Mars/Olympus' WHERE id = 'flaky'")
    broken_again = dispatch_recorded([conn], RunRequest(now=at + timedelta(days=2)))

    # At 4aaeb27 (reverted): {'flaky': (11-20, run 1)} kept by the run of
    # 11-21, which did not read the duty (its dispatch_next_at moved by the
    # run that faulted it), and the new breakage counted 0.
    assert (mended, broken_again.new_faults) == ({}, 1)


def test_a_fault_whose_duty_a_run_read_and_dispatched_ends_though_its_next_instant_came_back(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    # Dispatched on 08-21 (its next owed instant 08-25),
    # refused in a backfill: its fault begins with that instant. Broken
    # otherwise (an unknown zone), then mended by an edit, the run of 08-23
    # reads it and keeps its account, which comes back to the same instant,
    # 08-25. Broken again after that run, it is a new fault.
    insert_duties(conn, [duty("good"), duty("flaky")])
    invoke(_scheduled(0))
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT no_flaky CHECK (subject <> 'Duty flaky') NOT VALID"
    )
    backfill = {"now": _at(0).isoformat(), "from": "2026-01-01", "to": "2026-06-30"}
    assert _new_faults_published(invoke, backfill, capsys) == 1
    conn.execute("UPDATE duly_duty SET timezone = 'Mars/Olympus' WHERE id = 'flaky'")
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 0
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_flaky")
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'flaky'")
    mended = invoke(_scheduled(2))
    kept = _account(conn)
    conn.execute("UPDATE duly_duty SET timezone = 'Mars/Olympus' WHERE id = 'flaky'")
    again = _new_faults_published(invoke, _scheduled(3), capsys)

    assert (mended["faults"], mended["duties_read"], mended["tasks_existing"]) == ([], 1, 1)
    # At 4aaeb27 (reverted): ({'flaky': (08-21, the backfill's run)}, 0):
    # the run of 08-23 judged the duty without a fault, yet kept its row.
    assert (kept, again) == ({}, 1)


def test_a_refused_duty_mended_with_an_edit_that_keeps_its_schedule_leaves_the_account(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    # Dispatched on 08-21, refused in a backfill (its fault begins with 08-25, its next owed
    # instant); mended, and handed to a new owner: the run of 08-22 reads it
    # (the edit reset its instant) and keeps its account, whose next owed
    # instant is 08-25 again.
    insert_duties(conn, [duty("good"), duty("flaky")])
    invoke(_scheduled(0))
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT no_flaky CHECK (subject <> 'Duty flaky') NOT VALID"
    )
    backfill = {"now": _at(0).isoformat(), "from": "2026-01-01", "to": "2026-06-30"}
    assert _new_faults_published(invoke, backfill, capsys) == 1
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_flaky")
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = 'flaky'")
    mended = invoke(_scheduled(1))

    assert (mended["faults"], mended["duties_read"], mended["accounts_kept"]) == ([], 1, 1)
    # At 4aaeb27 (reverted): the backfill's row kept.
    assert _account(conn) == {}


@pytest.mark.parametrize(
    ("window", "ended"),
    [(("2026-07-01", "2026-07-31"), True), (("2025-01-01", "2025-03-31"), False)],
    ids=["writing its rows", "owing it nothing"],
)
def test_a_backfill_ends_the_fault_of_a_refused_duty_it_finds_without_a_fault(
    conn: Conn, invoke: Invoke, window: tuple[str, str], ended: bool
) -> None:
    # Refused in a backfill, then mended. A backfill keeps no account, so
    # nothing shows whether it tried the duty's rows: it ends the fault of
    # every duty it finds without one, as a fault that stays open after its
    # rows were written would keep the next breakage from alarming.
    insert_duties(conn, [duty("good"), duty("flaky", effective_from=date(2026, 1, 1))])
    invoke(_scheduled(0))
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT no_flaky CHECK (subject <> 'Duty flaky') NOT VALID"
    )
    invoke({"now": _at(0).isoformat(), "from": "2026-01-01", "to": "2026-06-30"})
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_flaky")
    mended = invoke({"now": _at(1).isoformat(), "from": window[0], "to": window[1]})
    written = conn.execute(
        "SELECT count(*) FROM duly_task WHERE duty_id = 'flaky' AND period_key LIKE '2026-07'"
    ).fetchone()

    assert (written, mended["faults"]) == ((int(ended),), [])
    # At da38dd8's parent: the backfill's fault kept.
    assert _account(conn) == {}


_OLD_RULES = "tzdata 2020a; holidays 0; owed 0"


def _hours(day: int, hours: int) -> dict[str, Any]:
    at = _at(day) + timedelta(hours=hours)
    return {"scheduled_time": at.isoformat().replace("+00:00", "Z")}


@pytest.mark.parametrize(
    ("refusing", "mending"),
    [
        pytest.param((0, 1), (0, 2), id="hourly runs"),
        pytest.param((0, 0), (0, 0), id="re-runs at the day's clock"),
        pytest.param((1, 0), (0, 5), id="a manual run at a past clock mends it"),
    ],
)
def test_a_refused_duty_a_run_dispatches_on_its_account_s_day_is_new_again_when_broken_again(
    conn: Conn,
    invoke: Invoke,
    capsys: pytest.CaptureFixture[str],
    refusing: tuple[int, int],
    mending: tuple[int, int],
) -> None:
    # A monthly duty (lead 7) dispatched at 08-21 01:00: its account stands
    # at 08-21, its next instant 08-25. Its August task deleted, new rules
    # (a tzdata release): the next run judges it afresh and the server
    # refuses its row. Mended, a run on the account's day (08-21) owes it
    # that judgement still and re-creates August, writing the account back
    # as it stood (its day 08-21, its next instant 08-25): the fault ends
    # all the same. Broken again, the run of 08-25 finds September refused:
    # a new breakage.
    insert_duties(conn, [duty("good"), duty("flaky")])
    invoke(_scheduled(0))
    conn.execute("DELETE FROM duly_task WHERE duty_id = 'flaky'")
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (_OLD_RULES,))
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT no_flaky CHECK (subject <> 'Duty flaky') NOT VALID"
    )
    assert _new_faults_published(invoke, _hours(*refusing), capsys) == 1
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_flaky")
    mended = invoke(_hours(*mending))
    kept = _account(conn)
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT no_flaky CHECK (subject <> 'Duty flaky') NOT VALID"
    )
    again = _new_faults_published(invoke, _scheduled(4), capsys)

    assert (mended["tasks_created"], mended["faults"]) == (1, [])
    # At 572b9f2 (reverted): ({'flaky': (the refusing run's clock, its run)},
    # 0): the alarm silent for a duty mended, dispatched and broken again.
    assert (kept, again) == ({}, 1)


def test_a_refused_duty_a_scoped_run_dispatches_before_the_refusing_backfill_reads_it_is_new_again_when_broken_again(  # noqa: E501 - the behaviour is the name
    conn: Conn, db_url: str, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    # A backfill at 08-25 finds the server refusing flaky's rows. Before the
    # backfill ends, the rule is dropped and an operator's run scoped to the
    # duty dispatches September. The next day's run finds the duty without
    # a fault and ends it; broken again, the run of 09-25 finds October
    # refused: a new breakage.
    insert_duties(conn, [duty("good"), duty("flaky", effective_from=date(2026, 1, 1))])
    invoke(_scheduled(0))
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT no_flaky CHECK (subject <> 'Duty flaky') NOT VALID"
    )
    failures: list[BaseException] = []

    def page(*args: Any, **kwargs: Any) -> Any:
        try:
            return dispatch_page(*args, **kwargs)
        except psycopg.Error as refused:
            failures.append(refused)
            if len(failures) == 2:  # flaky's page alone: its row is read next
                with psycopg.connect(db_url, autocommit=True) as operator:
                    operator.execute("ALTER TABLE duly_task DROP CONSTRAINT no_flaky")
                    scoped = dispatch_recorded(
                        [operator], RunRequest(now=_at(4), scope=Scope(duty_ids=("flaky",)))
                    )
                    assert scoped.report.tasks_created == 1
            raise

    backfill = RunRequest(now=_at(4), window=Window(date(2026, 1, 1), date(2026, 6, 30)))
    refusing = dispatch_recorded([conn], backfill, replace(runtime(), dispatch_page=page))
    assert [each.duty_id for each in refusing.report.faults] == ["flaky"]
    assert refusing.new_faults == 1
    invoke(_scheduled(5))
    after = _account(conn)
    conn.execute(
        "ALTER TABLE duly_task ADD CONSTRAINT no_flaky CHECK (subject <> 'Duty flaky') NOT VALID"
    )
    again = _new_faults_published(invoke, _scheduled(35), capsys)

    # At 572b9f2 (reverted): the fault kept, and the breakage counted 0.
    assert (after, again) == ({}, 1)

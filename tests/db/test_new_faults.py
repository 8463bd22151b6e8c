"""``NewFaults``: the duties a run faulted that the previous completed clock did not.

The stack's Degraded alarm watches it, so one duty that stays broken does not
keep the alarm in ALARM and mute the next broken duty. The count comes from
the ledger's reports, whose fault lists stop at a hundred: it is a lower
bound, exact when no list omitted any.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch_fn.db import ledger, new_faults
from dispatch_fn.db.store import Scope
from dispatch_fn.run import dispatch
from dispatch_fn.run.dispatch import FAULT_LIST_LIMIT
from support import Conn, Invoke, duty, insert_duties

_DAY_1 = datetime(2026, 8, 21, 1, tzinfo=UTC)
_BROKEN = {"timezone": "Mars/Olympus"}


def _scheduled(day: int) -> dict[str, Any]:
    return {"scheduled_time": (_DAY_1 + timedelta(days=day)).isoformat().replace("+00:00", "Z")}


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


@pytest.fixture(autouse=True)
def _metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")


def test_a_duty_that_stays_broken_is_new_once_and_a_second_broken_duty_is_new_again(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("good"), duty("broken-1", **_BROKEN)])
    # The first clock has no previous one: its fault is new.
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


def test_backfills_and_dry_runs_are_not_the_previous_clock(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN)])
    backfill = {"now": _DAY_1.isoformat(), "from": "2026-01-01", "to": "2026-06-30"}
    invoke(backfill)
    invoke({"now": _DAY_1.isoformat(), "dry_run": True})
    capsys.readouterr()
    # Only a completed scheduled run makes a clock "previous": the fault is still new.
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 1


def test_a_dry_run_publishes_no_new_faults(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, [duty("broken", **_BROKEN)])
    dry_run = {"now": _DAY_1.isoformat(), "dry_run": True}
    assert _new_faults_published(invoke, dry_run, capsys) is None


def test_a_longer_list_of_faults_than_a_report_holds_still_counts_each_added_duty(
    conn: Conn, invoke: Invoke, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = [duty(f"mars-{n:03d}", **_BROKEN) for n in range(FAULT_LIST_LIMIT + 20)]
    insert_duties(conn, broken)
    assert _new_faults_published(invoke, _scheduled(0), capsys) == FAULT_LIST_LIMIT + 20
    assert _new_faults_published(invoke, _scheduled(1), capsys) == 0
    insert_duties(conn, [duty("mars-new-1", **_BROKEN), duty("mars-new-2", **_BROKEN)])
    assert _new_faults_published(invoke, _scheduled(2), capsys) == 2


@pytest.mark.xfail(reason="issue 37, defect 6: fixed on this branch", strict=True)
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


@pytest.mark.xfail(reason="issue 37, defect 6: fixed on this branch", strict=True)
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


# --- the bound, for every pair of fault sets ---------------------------------


def _record(
    conn: Conn,
    clock: datetime,
    faulted: list[str],
    *,
    status: str = "completed",
    continues: int | None = None,
) -> int:
    """A scheduled run at ``clock`` whose report lists ``faulted`` as a run would.

    ``continues`` makes it the next link of that run's chain.
    """
    request = dispatch.RunRequest(now=clock, scope=Scope())
    if continues is not None:
        request = dispatch.RunRequest(now=clock, scope=Scope(resume_after="m"), continuation=1)
    run_id = ledger.start(conn, request, request_id=None, continues_run=continues)
    listed = faulted[:FAULT_LIST_LIMIT]
    report = {
        "run_id": run_id,
        "faults": [{"duty_id": d, "reason": "invalid_cadence", "detail": "x"} for d in listed],
        "faults_omitted": len(faulted) - len(listed),
    }
    ledger.finish(conn, run_id, status, report)
    return run_id


def test_every_link_of_the_previous_clocks_chain_counts_as_faulted_then(conn: Conn) -> None:
    # Each link of a chain lists the faults of its own part of the duties.
    first = _record(conn, _DAY_1, ["a", "b"], status="incomplete")
    _record(conn, _DAY_1, ["x", "y"], continues=first)
    now = ["a", "b", "x", "y", "z"]
    run_id = _record(conn, _DAY_1 + timedelta(days=1), now)
    assert new_faults.count(conn, run_id, len(now)) == 1


def test_a_clock_whose_chain_never_completed_is_not_the_previous_clock(conn: Conn) -> None:
    _record(conn, _DAY_1, ["a"])
    _record(conn, _DAY_1 + timedelta(days=1), ["a", "b"], status="incomplete")
    now = ["a", "b"]
    run_id = _record(conn, _DAY_1 + timedelta(days=2), now)
    # Compared with day 1, the last clock that completed: b is new to it.
    assert new_faults.count(conn, run_id, len(now)) == 1


_FAULT_SETS = st.lists(st.integers(0, 160), unique=True, max_size=140)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=_FAULT_SETS, now=_FAULT_SETS, shuffle=st.randoms(use_true_random=False))
def test_new_faults_never_exceed_the_truly_new_and_equal_them_when_nothing_is_omitted(
    conn: Conn, before: list[int], now: list[int], shuffle: Any
) -> None:
    conn.execute("DELETE FROM duly_dispatch_run")
    ids_before = [f"d{n:03d}" for n in before]
    ids_now = [f"d{n:03d}" for n in now]
    shuffle.shuffle(ids_now)
    _record(conn, _DAY_1, ids_before)
    run_id = _record(conn, _DAY_1 + timedelta(days=1), ids_now)
    counted = new_faults.count(conn, run_id, len(ids_now))
    truly_new = len(set(ids_now) - set(ids_before))
    assert 0 <= counted <= truly_new
    if len(ids_before) <= FAULT_LIST_LIMIT and len(ids_now) <= FAULT_LIST_LIMIT:
        assert counted == truly_new
    # Growth always shows: at most as many faults as before can be old ones.
    assert counted >= len(ids_now) - len(ids_before)


def test_a_run_the_ledger_cannot_find_counts_every_fault_as_new(conn: Conn) -> None:
    assert new_faults.count(conn, 10**12, 5) == 5

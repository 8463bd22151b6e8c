"""Each duty keeps its own account (docs/contract.md#account).

What a run owes a duty is decided from the duty's own row: the day through
which its periods are dispatched, and the marks an edit leaves (paused,
changed). Each test here is a way issue 37 found to lose a period behind a
run that said it was complete, replayed through the handler.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dispatch_fn.aws import handle, runtime_for
from dispatch_fn.engine import periods
from dispatch_fn.planning import RunRequest, Scope
from dispatch_fn.run import dispatch_recorded
from runtimes import runtime
from support import Conn, Invoke, clock_event, duty, insert_duties, set_aside, task_keys

DAY = timedelta(days=1)
# The daily runs of the set-aside scenarios: 2026-11-20 at 01:00 UTC, and on.
FIRST = datetime(2026, 11, 20, 1, 0, tzinfo=UTC)
LOCKED = "d1"


def _set_aside_on_the_21st(conn: Conn, holder: Conn, invoke: Invoke) -> None:
    """A daily UTC duty, lead 0: the 20th dispatched, the 21st's run finds its row locked."""
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    set_aside(holder, invoke, FIRST + DAY, LOCKED)


def _paused_on_its_account_day_and_resumed_after_the_21st(conn: Conn, invoke: Invoke) -> None:
    """A daily UTC duty, lead 0: the 20th dispatched, paused then, resumed after the 21st's run."""
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))


def _set_aside_on_the_last_two_days_of_its_window(conn: Conn, holder: Conn, invoke: Invoke) -> None:
    """A daily UTC duty, lead 0, its window ending on the 22nd: set aside on the 21st and 22nd."""
    insert_duties(
        conn,
        [duty(LOCKED, frequency="daily", lead_days=0, effective_to=date(2026, 11, 22))],
    )
    invoke(clock_event(FIRST))
    set_aside(holder, invoke, FIRST + DAY, LOCKED)
    set_aside(holder, invoke, FIRST + 2 * DAY, LOCKED)


def _paused_over_a_run(conn: Conn, invoke: Invoke, at: datetime) -> None:
    """The duty paused, the run at ``at`` made, the duty resumed."""
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke(clock_event(at))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))


@pytest.mark.parametrize(
    ("leave", "back"),
    [
        ("status = 'paused'", "status = 'active'"),
        ("status = 'retired'", "status = 'active'"),
        ("review_status = 'to_review'", "review_status = 'approved'"),
    ],
)
def test_a_set_aside_duty_then_paused_is_owed_the_set_aside_day_but_not_the_paused_days(
    conn: Conn, holder: Conn, invoke: Invoke, leave: str, back: str
) -> None:
    _set_aside_on_the_21st(conn, holder, invoke)
    conn.execute(f"UPDATE duly_duty SET {leave} WHERE id = %s", (LOCKED,))
    for day in range(2, 6):
        invoke(clock_event(FIRST + day * DAY))
    conn.execute(f"UPDATE duly_duty SET {back} WHERE id = %s", (LOCKED,))
    resumed = invoke(clock_event(FIRST + 6 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-26"]
    assert resumed["degraded"] is False


@pytest.mark.parametrize("added_broken", [False, True])
def test_a_duty_of_an_unknown_form_gets_the_days_it_was_faulted_once_fixed(
    conn: Conn, invoke: Invoke, added_broken: bool
) -> None:
    # An unknown form is a fault (unknown_form), not a pause: fixed, the duty
    # owes what became owed meanwhile, as one whose zone was fixed does.
    insert_duties(conn, [duty("d2")])
    invoke(clock_event(FIRST))
    if added_broken:
        insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, form="recurrin")])
    else:
        insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
        invoke(clock_event(FIRST + DAY))
        conn.execute("UPDATE duly_duty SET form = 'recurrin' WHERE id = %s", (LOCKED,))
    faulted = invoke(clock_event(FIRST + 2 * DAY))
    conn.execute("UPDATE duly_duty SET form = 'recurring' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    assert faulted["fault_counts"]["unknown_form"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-21", "2026-11-22", "2026-11-23"]


@pytest.mark.parametrize(
    ("broken", "fixed"),
    [
        ("timezone = 'Mars/Olympus'", "timezone = 'UTC'"),
        (
            "due_anchor = 'period_start', due_offset_months = 5",
            "due_offset_months = 0",
        ),
    ],
)
def test_a_set_aside_duty_that_faults_before_it_is_repaid_gets_the_period_once_fixed(
    conn: Conn, holder: Conn, invoke: Invoke, broken: str, fixed: str
) -> None:
    _set_aside_on_the_21st(conn, holder, invoke)
    conn.execute(f"UPDATE duly_duty SET {broken} WHERE id = %s", (LOCKED,))
    faulted = invoke(clock_event(FIRST + 2 * DAY))
    conn.execute(f"UPDATE duly_duty SET {fixed} WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    assert faulted["fault_counts"]["invalid_cadence"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23"]


def test_a_set_aside_duty_whose_frequency_changes_is_reported_not_lost_in_silence(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_on_the_21st(conn, holder, invoke)
    conn.execute("UPDATE duly_duty SET frequency = 'monthly' WHERE id = %s", (LOCKED,))
    changed = invoke(clock_event(FIRST + 2 * DAY))

    # The new cadence owes its current period; what the daily cadence owed on
    # the 21st is counted as lapsed by the change, never in silence.
    assert task_keys(conn, LOCKED) == ["2026-11", "2026-11-20"]
    assert changed["changed_while_owed"] == 1


@pytest.mark.parametrize(
    ("zone", "short_day"),
    [
        ("Europe/Berlin", "2026-03-29"),
        ("Antarctica/Troll", "2026-03-29"),
        ("America/Nuuk", "2026-03-28"),
        ("America/Santiago", "2026-09-06"),
        ("Australia/Lord_Howe", "2026-10-04"),
    ],
)
def test_an_hourly_schedule_owes_a_short_day_missed_in_an_outage_of_under_a_day(
    conn: Conn, invoke: Invoke, zone: str, short_day: str
) -> None:
    # The last run comes a quarter of an hour before the short day begins, the
    # next one as it ends: under 24 hours apart, no run ever saw it as today.
    bounds = periods.period_bounds("daily", short_day, zone)
    last_run, next_run = bounds.start - timedelta(minutes=15), bounds.end
    assert next_run - last_run < DAY
    insert_duties(conn, [duty("d1", frequency="daily", timezone=zone, lead_days=0)])
    invoke(clock_event(last_run), schedule_interval_hours=1)
    after = invoke(clock_event(next_run), schedule_interval_hours=1)

    assert short_day in task_keys(conn, "d1")
    assert after["degraded"] is False


def test_an_edit_committed_while_a_run_waits_on_the_row_is_never_overwritten(
    conn: Conn, db_url: str, invoke: Invoke
) -> None:
    # The run's page waits for the row another session holds while changing
    # the owner; the edit commits, the page's UPDATE reads the newest row
    # version, sees the account's version moved, and leaves the marks. The
    # next run reads the edit: the new owner gets the current period.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, owner_id="alice")])
    invoke(clock_event(FIRST))
    with psycopg.connect(db_url) as editor:
        editor.execute("UPDATE duly_duty SET owner_id = 'bob' WHERE id = %s", (LOCKED,))
        committer = threading.Timer(0.5, editor.commit)
        committer.start()
        try:
            during = invoke(clock_event(FIRST + DAY), lock_timeout_ms=10_000)
        finally:
            committer.join()
    after = invoke(clock_event(FIRST + DAY))

    assert during["set_aside_count"] == 0
    owners = conn.execute(
        "SELECT period_key, owner_id FROM duly_task ORDER BY period_key, owner_id"
    ).fetchall()
    # The run that waited read alice (its snapshot) and created her day; bob
    # owes the same day as the new owner, created by the run after.
    assert owners == [("2026-11-20", "alice"), ("2026-11-21", "alice"), ("2026-11-21", "bob")]
    assert after["tasks_created"] == 1


def test_a_deleted_task_is_not_re_created_until_a_change_owes_its_period_afresh(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task")
    again = invoke(clock_event(FIRST))
    # A change owes the current period as if it became owed then.
    conn.execute("UPDATE duly_duty SET grace_days = 3 WHERE id = %s", (LOCKED,))
    changed = invoke(clock_event(FIRST))

    assert again["tasks_created"] == 0
    assert changed["tasks_created"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-20"]


@pytest.mark.parametrize(
    ("edit", "tasks"),
    [
        ("UPDATE duly_duty SET organization_id = 'org-2' WHERE id = %s", [("org-2", "2026-11-20")]),
        ("DELETE FROM duly_duty WHERE id = %s", []),
    ],
    ids=["moved", "deleted"],
)
def test_a_duty_moved_or_deleted_while_a_run_waits_on_it_is_no_fault(
    conn: Conn, db_url: str, invoke: Invoke, edit: str, tasks: list[tuple[str, str]]
) -> None:
    # The run read the duty under org-1; the move commits while the page's
    # insert waits on the row, and the task's foreign key then finds no
    # (org-1, d1): the duty changed under the statement, as in a deadlock,
    # and nothing is wrong with its row. Deleted instead, it owes nothing.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    with psycopg.connect(db_url) as editor:
        editor.execute(edit, (LOCKED,))
        committer = threading.Timer(0.5, editor.commit)
        committer.start()
        try:
            during = invoke(clock_event(FIRST), lock_timeout_ms=10_000)
        finally:
            committer.join()
    invoke(clock_event(FIRST))

    assert (during["degraded"], during["faults"]) == (False, [])
    assert conn.execute("SELECT organization_id, period_key FROM duly_task").fetchall() == tasks


# Zones whose day at the clock the server's tz data reads otherwise than the
# engine's pinned release: the server takes `CET` for the fixed abbreviation
# +01:00, a day early in summer from 22:00 to 23:00 UTC; a server whose tz
# release predates the engine's reads America/Vancouver at -08:00 from
# 2026-11-01 (the engine's release: -07:00). Each with a first clock and its
# local day by the engine (00:30 there).
ZONES_THE_SERVER_READS_OTHERWISE = [
    pytest.param(("CET", datetime(2026, 6, 29, 22, 30, tzinfo=UTC), date(2026, 6, 30)), id="CET"),
    pytest.param(
        ("America/Vancouver", datetime(2026, 11, 19, 7, 30, tzinfo=UTC), date(2026, 11, 19)),
        id="Vancouver",
    ),
]


@pytest.mark.parametrize("case", ZONES_THE_SERVER_READS_OTHERWISE)
def test_a_pause_is_placed_on_the_day_the_run_judged_in_the_duty_zone(
    conn: Conn, holder: Conn, invoke: Invoke, case: tuple[str, datetime, date]
) -> None:
    zone, first, day = case
    # Set aside on the second day, paused after that day's run, resumed after
    # the next: the second day is owed, the third (paused) is not.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, timezone=zone)])
    invoke(clock_event(first))
    set_aside(holder, invoke, first + DAY, LOCKED)
    _paused_over_a_run(conn, invoke, first + 2 * DAY)
    invoke(clock_event(first + 3 * DAY))

    assert task_keys(conn, LOCKED) == [str(day), str(day + DAY), str(day + 3 * DAY)]


@pytest.mark.parametrize("case", ZONES_THE_SERVER_READS_OTHERWISE)
def test_a_duty_added_after_a_run_owes_from_the_day_the_run_judged_in_its_zone(
    conn: Conn, invoke: Invoke, case: tuple[str, datetime, date]
) -> None:
    zone, first, day = case
    insert_duties(conn, [duty("d2")])
    invoke(clock_event(first))
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, timezone=zone)])
    invoke(clock_event(first + DAY))

    assert task_keys(conn, LOCKED) == [str(day + DAY)]


@pytest.mark.parametrize(("old", "new"), [("weekly", "fortnightly"), ("fortnightly", "weekly")])
def test_a_duty_moved_between_weekly_and_fortnightly_keeps_the_task_its_shared_key_holds(
    conn: Conn, invoke: Invoke, old: str, new: str
) -> None:
    # Monday 2026-11-16 starts the week 2026-W47 and the fortnight 2026-W47:
    # the key is the task's identity, so the old cadence's task stands.
    monday = datetime(2026, 11, 16, 1, 0, tzinfo=UTC)
    insert_duties(conn, [duty(LOCKED, frequency=old, due_anchor="period_end", lead_days=0)])
    invoke(clock_event(monday))
    first = conn.execute("SELECT period_key, due_date FROM duly_task").fetchall()
    conn.execute("UPDATE duly_duty SET frequency = %s WHERE id = %s", (new, LOCKED))
    explained = invoke({"query": "explain", "duty_id": LOCKED, **clock_event(monday + DAY)})
    changed = invoke(clock_event(monday + DAY))

    verdicts = {c["period_key"]: c["verdict"] for c in explained["explain"]["candidates"]}
    assert verdicts["2026-W47"] == "exists"
    assert (changed["tasks_created"], changed["tasks_existing"]) == (0, 1)
    assert conn.execute("SELECT period_key, due_date FROM duly_task").fetchall() == first


def test_a_run_under_new_rules_judges_every_account_afresh(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task")
    same_rules = invoke(clock_event(FIRST))
    # The previous run judged by other rules (a new tzdata release, say).
    conn.execute("UPDATE duly_dispatch_run SET rules = 'tzdata 2020a; holidays 0; owed 0'")
    new_rules = invoke(clock_event(FIRST))

    assert same_rules["tasks_created"] == 0
    assert new_rules["tasks_created"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-20"]


OLD_RULES = "tzdata 2020a; holidays 0; owed 0"


def _set_aside_by_the_first_run_under_new_rules(conn: Conn, holder: Conn, invoke: Invoke) -> None:
    """A monthly duty's current task deleted; the first run under new rules finds its row locked."""
    insert_duties(conn, [duty(LOCKED), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task WHERE duty_id = %s", (LOCKED,))
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    set_aside(holder, invoke, FIRST + DAY, LOCKED)


def test_a_duty_set_aside_by_the_first_run_under_new_rules_is_judged_afresh_by_the_next(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_by_the_first_run_under_new_rules(conn, holder, invoke)
    nxt = invoke(clock_event(FIRST + 2 * DAY))
    after = invoke(clock_event(FIRST + 3 * DAY))

    # Before: [], the run that set it aside counted as having judged it afresh
    # and the next run, its rules the same, never read the monthly duty.
    assert task_keys(conn, LOCKED) == ["2026-11"]
    assert nxt["tasks_created"] == 1
    # Judged afresh once: the run after reads neither duty (nothing owed).
    assert after["duties_read"] == 0


def test_a_duty_set_aside_again_by_the_next_run_is_still_owed_a_fresh_judgement(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_by_the_first_run_under_new_rules(conn, holder, invoke)
    set_aside(holder, invoke, FIRST + 2 * DAY, LOCKED)
    third = invoke(clock_event(FIRST + 3 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11"]
    # Only the duty owed a fresh judgement is read, not every duty.
    assert (third["tasks_created"], third["duties_read"]) == (1, 1)


def test_a_scoped_run_between_leaves_the_fresh_judgement_owed(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_by_the_first_run_under_new_rules(conn, holder, invoke)
    # A run limited to another duty is never the previous run: what the last
    # unscoped run left owed stays owed past it.
    invoke({**clock_event(FIRST + 2 * DAY), "duty_ids": ["d2"]})
    invoke(clock_event(FIRST + 2 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11"]


def test_explain_judges_afresh_a_duty_set_aside_by_the_first_run_under_new_rules(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_by_the_first_run_under_new_rules(conn, holder, invoke)
    asked = invoke({"query": "explain", "duty_id": LOCKED, "now": "2026-11-22T01:00:00Z"})

    verdicts = {c["period_key"]: c["verdict"] for c in asked["explain"]["candidates"]}
    assert verdicts["2026-11"] == "would_create"


def test_explain_under_new_rules_judges_the_account_afresh_as_the_run_does(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task")
    conn.execute("UPDATE duly_dispatch_run SET rules = 'tzdata 2020a; holidays 0; owed 0'")
    dry = invoke({**clock_event(FIRST), "dry_run": True, "duty_ids": [LOCKED]})
    asked = invoke({"query": "explain", "duty_id": LOCKED, "now": "2026-11-20T01:00:00Z"})
    real = invoke(clock_event(FIRST))

    for explained in (dry["explain"][LOCKED], asked["explain"]):
        verdicts = {c["period_key"]: c["verdict"] for c in explained["candidates"]}
        assert verdicts == {"2026-11-20": "would_create"}
    assert dry["tasks_would_create"] == real["tasks_created"] == 1


def test_an_outage_longer_than_the_horizon_counts_what_it_did_not_create(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    later = invoke(clock_event(FIRST + 10 * DAY))

    # The horizon is seven days: what became owed on 11-23 .. 11-30 is
    # created; 11-21 and 11-22, over and owed before it, are counted.
    assert task_keys(conn, LOCKED) == [f"2026-11-{day}" for day in (20, *range(23, 31))]
    assert (later["beyond_horizon"], later["degraded"]) == (1, False)


def test_an_outage_past_the_horizon_counts_nothing_a_backfill_created_ahead_of_it(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    invoke({"from": "2026-11-20", "to": "2026-11-30"})
    dry = invoke({**clock_event(FIRST + 10 * DAY), "dry_run": True})
    later = invoke(clock_event(FIRST + 10 * DAY))

    # 11-21 and 11-22 are over and became owed before the horizon, but the
    # backfill created them: nothing lapsed.
    assert task_keys(conn, LOCKED) == [f"2026-11-{day}" for day in range(20, 31)]
    assert (dry["beyond_horizon"], later["beyond_horizon"]) == (0, 0)


def test_explain_shows_the_duty_s_account_and_the_day_it_next_owes(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="weekly", lead_days=2)])
    invoke(clock_event(FIRST))
    explained = invoke({"query": "explain", "duty_id": LOCKED, "now": "2026-11-20T01:00:00Z"})

    # 2026-11-20 is a Friday in ISO week 47; week 48 (from the 23rd) shows on the 21st.
    account = explained["explain"]["account"]
    assert account == {
        "dispatch_through": "2026-11-20",
        "dispatch_paused_on": None,
        "dispatch_changed_on": None,
        "dispatch_owed_between": [],
        "dispatch_recast_on": None,
        "next_owed": "2026-11-21",
        "dispatch_next": "2026-11-21",
        "dispatch_next_at": "2026-11-21T00:00:00+00:00",
        "lapsed_before_candidates": False,
    }
    verdicts = {c["period_key"]: c["verdict"] for c in explained["explain"]["candidates"]}
    assert verdicts == {"2026-W47": "exists"}


def test_a_period_whose_due_date_rolls_back_before_it_is_owed_once_its_lead_reaches_it(
    conn: Conn, invoke: Invoke
) -> None:
    # Sunday 2026-03-29 rolls back to Friday the 27th, so its visible_from
    # (lead 3) is the 24th, before the run of the 24th holds it as a
    # candidate (today plus the lead reaches the 27th). It becomes owed when
    # the lead reaches it, on the 26th, not on the 24th, which the account
    # passed before any run could see it.
    insert_duties(conn, [duty("rolled", frequency="daily", lead_days=3, due_roll="preceding")])
    for day in range(24, 30):
        invoke(clock_event(datetime(2026, 3, day, 1, tzinfo=UTC)))

    assert "2026-03-29" in task_keys(conn, "rolled")
    due = conn.execute(
        "SELECT due_date::text FROM duly_task WHERE period_key = '2026-03-29'"
    ).fetchone()
    assert due == ("2026-03-27",)


def test_a_manual_run_at_a_future_clock_is_never_the_previous_rules(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task")
    # A manual run at a clock ahead of the wall clock, under other rules.
    conn.execute(
        "INSERT INTO duly_dispatch_run (mode, clock, dry_run, status, started_at, finished_at,"
        " rules) VALUES ('scheduled', '2030-01-01T01:00:00Z', false, 'completed', now(), now(),"
        " 'tzdata 2020a; holidays 0; owed 0')"
    )
    again = invoke(clock_event(FIRST))

    # The previous run is the one at FIRST, under this build's rules: nothing
    # is judged afresh, and the deleted task is not owed again.
    assert again["tasks_created"] == 0


def test_a_manual_run_at_a_future_clock_counts_what_lapsed_past_its_horizon(
    conn: Conn, invoke: Invoke
) -> None:
    start = datetime.now(UTC).replace(hour=1, minute=0, second=0, microsecond=0) - 2 * DAY
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(start))
    ahead = invoke(clock_event(start + 12 * DAY))

    # Ten days after the account's, the horizon seven: the first two lapsed.
    # The run keeps no account (its clock is ahead of the wall clock), but
    # it counts what it did not create, as a scheduled run there would.
    assert len(task_keys(conn, LOCKED)) == 1 + 8
    assert ahead["beyond_horizon"] == 1
    assert conn.execute(
        "SELECT dispatch_through FROM duly_duty WHERE id = %s", (LOCKED,)
    ).fetchone() == (start.date(),)


def test_a_duty_set_aside_on_its_first_run_owes_every_day_the_horizon_holds(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (LOCKED,))
    invoke(clock_event(FIRST), lock_timeout_ms=200, catch_up_days=1)
    holder.rollback()
    invoke(clock_event(FIRST + 4 * DAY), catch_up_days=1)

    # A horizon of one day owes today and the day before it.
    assert task_keys(conn, LOCKED) == ["2026-11-23", "2026-11-24"]


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE duly_duty SET owner_id = 'owner-2'",
        # New rules judge every account afresh, as if changed on its own day.
        "UPDATE duly_dispatch_run SET rules = 'tzdata 2020a; holidays 0; owed 0'",
    ],
)
def test_a_run_at_a_clock_before_the_account_s_day_creates_nothing_it_says_is_done(
    conn: Conn, invoke: Invoke, edit: str
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    conn.execute("DELETE FROM duly_task WHERE period_key = '2026-11-20'")
    conn.execute(edit)
    past = invoke(clock_event(FIRST))

    # The account is through the 21st: the 20th is done, whoever owns it now.
    assert past["tasks_created"] == 0
    assert task_keys(conn, LOCKED) == ["2026-11-21"]


def test_an_outage_past_the_horizon_counts_nothing_its_lead_had_already_owed(
    conn: Conn, invoke: Invoke
) -> None:
    # Lead 3: the run of the 20th owed the days up to the 23rd. The run of the
    # 23rd, with a horizon of one day, owes from the 22nd's becoming owed: the
    # 21st's day became owed on the 18th, which the account had passed.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=3)])
    invoke(clock_event(FIRST), catch_up_days=1)
    later = invoke(clock_event(FIRST + 3 * DAY), catch_up_days=1)

    assert later["beyond_horizon"] == 0
    assert task_keys(conn, LOCKED)[-1] == "2026-11-26"


def test_a_pause_longer_than_the_horizon_counts_nothing_beyond_it(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'paused'")
    invoke(clock_event(FIRST + 9 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active'")
    resumed = invoke(clock_event(FIRST + 10 * DAY))

    # Nothing became owed while it was paused: nothing lapsed.
    assert resumed["beyond_horizon"] == 0
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-30"]


def test_an_outage_past_the_horizon_counts_the_day_just_before_it(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST), catch_up_days=1)
    later = invoke(clock_event(FIRST + 3 * DAY), catch_up_days=1)

    # The 21st became owed on the horizon: counted, not created.
    assert later["beyond_horizon"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-22", "2026-11-23"]


def test_a_duty_set_aside_on_its_first_run_counts_the_days_that_lapsed_past_the_horizon(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (LOCKED,))
    invoke(clock_event(FIRST), lock_timeout_ms=200, catch_up_days=1)
    holder.rollback()
    later = invoke(clock_event(FIRST + 4 * DAY), catch_up_days=1)

    # It owed from the scheduled clock before the first run (the 19th's): the
    # 20th to the 22nd lapsed, and are counted.
    assert later["beyond_horizon"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-23", "2026-11-24"]


def test_a_duty_set_aside_on_its_first_run_then_edited_still_owes_from_the_origin(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (LOCKED,))
    invoke(clock_event(FIRST), lock_timeout_ms=200)
    holder.rollback()
    conn.execute("UPDATE duly_duty SET grace_days = 2 WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))

    # The edit changed no period: it owes what it owed since the first run.
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-22"]


def test_a_zone_broken_before_any_run_and_fixed_later_loses_nothing(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    conn.execute("UPDATE duly_duty SET timezone = 'Mars/Olympus' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-22"]


def test_a_duty_added_paused_owes_nothing_from_before_it_is_resumed(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty("d2")])
    invoke(clock_event(FIRST))
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, status="paused")])
    invoke(clock_event(FIRST + DAY))
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-23"]


def test_a_duty_paused_again_after_a_set_aside_still_owes_the_set_aside_day(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    # Paused and resumed on the 20th: nothing owed in between.
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (LOCKED,))
    invoke(clock_event(FIRST + DAY), lock_timeout_ms=200)
    holder.rollback()
    # Set aside on the 21st, then paused before any run read it again.
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-23"]


def test_a_run_at_a_past_clock_keeps_the_marks_of_edits_made_after_it(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + DAY))
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    # A manual run at a clock of the 20th reads the resumed duty first.
    invoke(clock_event(FIRST + DAY / 2))
    invoke(clock_event(FIRST + 3 * DAY))

    # Paused from after the 20th's run to after the 22nd's: the 21st and the
    # 22nd became owed while it was paused, whatever the past run read.
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-23"]


def test_a_change_after_the_window_closed_is_not_counted_as_changed_while_owed(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET effective_to = '2026-11-20' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET grace_days = 3 WHERE id = %s", (LOCKED,))
    later = invoke(clock_event(FIRST + 2 * DAY))

    # Nothing was owed after the 20th, when its window closed.
    assert later["changed_while_owed"] == 0
    assert later["skipped"]["outside_effective_window"] == 1


def test_a_duty_paused_twice_between_the_runs_that_read_it_owes_both_spans(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Set aside on the 21st, paused, resumed after the 22nd's run, set aside
    # on the 23rd, paused again, resumed after the 24th's: the 21st and the
    # 23rd became owed while it was dispatchable, the 22nd and the 24th while
    # it was paused.
    _set_aside_on_the_21st(conn, holder, invoke)
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (LOCKED,))
    locked = invoke(clock_event(FIRST + 3 * DAY), lock_timeout_ms=200)
    holder.rollback()
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 4 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    explained = invoke({"query": "explain", "duty_id": LOCKED, "now": "2026-11-25T01:00:00Z"})
    invoke(clock_event(FIRST + 5 * DAY))

    assert [each["duty_id"] for each in locked["set_aside"]] == [LOCKED]
    account = explained["explain"]["account"]
    assert (account["dispatch_paused_on"], account["dispatch_changed_on"]) == (
        "2026-11-21",
        "2026-11-24",
    )
    assert account["dispatch_owed_between"] == [["2026-11-23", "2026-11-23"], ["2026-11-25", None]]
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-23", "2026-11-25"]


@pytest.mark.parametrize("edit", ["frequency = 'monthly'", "owner_id = 'u2'", "grace_days = 3"])
def test_a_change_made_while_paused_after_owed_days_is_counted_as_changed_while_owed(
    conn: Conn, holder: Conn, invoke: Invoke, edit: str
) -> None:
    # Set aside on the 21st, paused after that run, edited while paused,
    # resumed: the 21st became owed under the cadence the edit replaced.
    _set_aside_on_the_21st(conn, holder, invoke)
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    conn.execute(f"UPDATE duly_duty SET {edit} WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    resumed = invoke(clock_event(FIRST + 3 * DAY))

    assert resumed["changed_while_owed"] == 1


def test_a_change_made_while_paused_with_nothing_owed_is_not_counted(
    conn: Conn, invoke: Invoke
) -> None:
    # Paused on its account's day: no period became owed under the cadence
    # the edit replaced, so nothing of it is missing.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    conn.execute("UPDATE duly_duty SET frequency = 'monthly' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    resumed = invoke(clock_event(FIRST + 2 * DAY))

    assert resumed["changed_while_owed"] == 0
    assert task_keys(conn, LOCKED) == ["2026-11", "2026-11-20"]


def test_a_change_made_after_a_resume_from_a_pause_that_owed_nothing_is_counted(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Paused on its account's day, resumed after the 21st's run, set aside on
    # the 22nd, then changed: the 22nd became owed daily.
    _paused_on_its_account_day_and_resumed_after_the_21st(conn, invoke)
    set_aside(holder, invoke, FIRST + 2 * DAY, LOCKED)
    conn.execute("UPDATE duly_duty SET frequency = 'monthly' WHERE id = %s", (LOCKED,))
    explained = invoke({"query": "explain", "duty_id": LOCKED, "now": "2026-11-23T01:00:00Z"})
    changed = invoke(clock_event(FIRST + 3 * DAY))

    assert explained["explain"]["account"]["dispatch_recast_on"] == "2026-11-22"
    assert changed["changed_while_owed"] == 1


def test_a_duty_resumed_then_changed_then_paused_again_before_a_run_read_it_loses_nothing(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Paused on its account's day, resumed after the 21st's run, set aside on
    # the 22nd, its grace changed, set aside on the 23rd, paused again, and
    # resumed after the 24th's run: the 22nd and the 23rd became owed while it
    # was dispatchable, whatever changed between them.
    _paused_on_its_account_day_and_resumed_after_the_21st(conn, invoke)
    set_aside(holder, invoke, FIRST + 2 * DAY, LOCKED)
    conn.execute("UPDATE duly_duty SET grace_days = 3 WHERE id = %s", (LOCKED,))
    set_aside(holder, invoke, FIRST + 3 * DAY, LOCKED)
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 4 * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 5 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-22", "2026-11-23", "2026-11-25"]


def test_a_pause_after_owed_days_that_outlasts_the_horizon_counts_what_lapsed_before_it(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Set aside on the 21st, paused after that run, resumed ten days later:
    # the 21st became owed and lapsed before the period the run's schedule
    # reaches back to (the one before the horizon's).
    _set_aside_on_the_21st(conn, holder, invoke)
    _paused_over_a_run(conn, invoke, FIRST + 10 * DAY)
    clock = clock_event(FIRST + 11 * DAY)
    explained = invoke({"query": "explain", "duty_id": LOCKED, **clock})
    resumed = invoke(clock)

    assert explained["explain"]["account"]["lapsed_before_candidates"] is True
    assert resumed["beyond_horizon"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-12-01"]


def test_a_window_that_closed_before_the_horizon_counts_what_lapsed_in_it(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # No run reading it for ten days: both set-aside days lapsed inside the window.
    _set_aside_on_the_last_two_days_of_its_window(conn, holder, invoke)
    later = invoke(clock_event(FIRST + 12 * DAY))

    assert later["beyond_horizon"] == 1


def test_a_lapse_older_than_the_candidates_that_a_backfill_created_is_not_counted(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # The scenario above, but an operator backfills the 21st before the
    # resumed run: nothing that lapsed is missing from duly_task.
    _set_aside_on_the_21st(conn, holder, invoke)
    _paused_over_a_run(conn, invoke, FIRST + 10 * DAY)
    invoke({"from": "2026-11-20", "to": "2026-11-22", "duty_ids": [LOCKED]})
    clock = clock_event(FIRST + 11 * DAY)
    explained = invoke({"query": "explain", "duty_id": LOCKED, **clock})
    dry = invoke({**clock, "dry_run": True})
    resumed = invoke(clock)

    assert explained["explain"]["account"]["lapsed_before_candidates"] is False
    assert (dry["beyond_horizon"], resumed["beyond_horizon"]) == (0, 0)
    assert task_keys(conn, LOCKED)[:3] == ["2026-11-20", "2026-11-21", "2026-11-22"]


def test_a_lapse_in_a_window_closed_before_the_horizon_that_a_backfill_created_is_not_counted(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_on_the_last_two_days_of_its_window(conn, holder, invoke)
    invoke({"from": "2026-11-01", "to": "2026-11-30"})
    later = invoke(clock_event(FIRST + 12 * DAY))

    assert later["beyond_horizon"] == 0
    assert task_keys(conn, LOCKED)[-3:] == ["2026-11-20", "2026-11-21", "2026-11-22"]


def test_a_run_at_a_past_clock_inside_a_pause_creates_nothing_that_became_owed_in_it(
    conn: Conn, invoke: Invoke
) -> None:
    # Dispatched on the 20th, paused after that run, resumed after the 23rd's:
    # a manual run replaying the 21st's clock reads the resumed duty first.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    for day in (1, 2, 3):
        invoke(clock_event(FIRST + day * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + DAY))
    invoke(clock_event(FIRST + 4 * DAY))

    # The 21st became owed while it was paused: the resume came after it.
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-24"]


@pytest.mark.parametrize("edit", ["frequency = 'monthly'", "owner_id = 'u2'"])
def test_a_duty_no_run_kept_changed_after_its_first_run_set_it_aside_is_counted(
    conn: Conn, holder: Conn, invoke: Invoke, edit: str
) -> None:
    # Added before any run, so it owes from the first run's origin (the 19th);
    # that run sets it aside, and the 20th it owed under the old cadence or
    # owner is not spelled by the new one.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    set_aside(holder, invoke, FIRST, LOCKED)
    conn.execute(f"UPDATE duly_duty SET {edit} WHERE id = %s", (LOCKED,))
    explained = invoke({"query": "explain", "duty_id": LOCKED, **clock_event(FIRST + DAY)})
    changed = invoke(clock_event(FIRST + DAY))

    assert explained["explain"]["account"]["dispatch_recast_on"] == "2026-11-20"
    assert changed["changed_while_owed"] == 1


def test_a_duty_no_run_kept_changed_while_paused_since_the_origin_is_not_counted(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Added paused before any run: never dispatchable since the origin, so a
    # change while paused replaced nothing it owed.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, status="paused")])
    insert_duties(conn, [duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET frequency = 'monthly' WHERE id = %s", (LOCKED,))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    resumed = invoke(clock_event(FIRST + DAY))

    assert resumed["changed_while_owed"] == 0
    assert task_keys(conn, LOCKED) == ["2026-11"]


def test_a_duty_inserted_as_a_copy_of_another_row_starts_its_own_account(
    conn: Conn, invoke: Invoke
) -> None:
    # d1, paused on its account's day and resumed, holds an open span; a
    # console copies its row whole as d3, paused, resumed after the 24th's run.
    _paused_on_its_account_day_and_resumed_after_the_21st(conn, invoke)
    conn.execute("CREATE TEMP TABLE copy AS SELECT * FROM duly_duty WHERE id = %s", (LOCKED,))
    conn.execute("UPDATE copy SET id = 'd3', status = 'paused', last_dispatched_period = NULL")
    conn.execute("INSERT INTO duly_duty SELECT * FROM copy")
    for day in (2, 3, 4):
        invoke(clock_event(FIRST + day * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd3'")
    invoke(clock_event(FIRST + 5 * DAY))

    # Paused from its insert to after the 24th's run: nothing before the 25th.
    assert task_keys(conn, "d3") == ["2026-11-25"]


def test_explain_counts_what_lapsed_in_a_window_that_closed_before_the_horizon(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_on_the_last_two_days_of_its_window(conn, holder, invoke)
    clock = clock_event(FIRST + 12 * DAY)
    explained = invoke({"query": "explain", "duty_id": LOCKED, **clock})
    later = invoke(clock)

    assert later["beyond_horizon"] == 1
    assert explained["explain"]["account"]["lapsed_before_candidates"] is True


def test_explain_of_a_duty_no_run_kept_owes_from_the_first_run_s_origin(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Set aside by the first run (the 20th), paused after it, resumed ten
    # days later: the 20th became owed after the origin and lapsed.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    set_aside(holder, invoke, FIRST, LOCKED)
    _paused_over_a_run(conn, invoke, FIRST + 10 * DAY)
    clock = clock_event(FIRST + 11 * DAY)
    explained = invoke({"query": "explain", "duty_id": LOCKED, **clock})
    later = invoke(clock)

    assert later["beyond_horizon"] == 1
    assert explained["explain"]["account"]["lapsed_before_candidates"] is True


def _owners(conn: Conn) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT period_key, owner_id FROM duly_task WHERE duty_id = %s ORDER BY 1, 2", (LOCKED,)
    ).fetchall()
    return [(str(key), str(owner)) for key, owner in rows]


@pytest.mark.parametrize("scope", [{"organization_id": "org-1"}, {"duty_ids": [LOCKED]}, {}])
def test_a_duty_reassigned_after_scoped_runs_gives_the_new_owner_the_current_period_alone(
    conn: Conn, invoke: Invoke, scope: dict[str, object]
) -> None:
    # The runs of the 21st and the 22nd are scoped (the schedule paused, an
    # operator running one organisation): they keep the duty's account.
    insert_duties(
        conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2", organization_id="org-2")]
    )
    invoke(clock_event(FIRST))
    invoke({**clock_event(FIRST + DAY), **scope})
    invoke({**clock_event(FIRST + 2 * DAY), **scope})
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    assert _owners(conn) == [
        ("2026-11-20", "owner-1"),
        ("2026-11-21", "owner-1"),
        ("2026-11-22", "owner-1"),
        ("2026-11-23", "owner-2"),
    ]


@pytest.mark.parametrize("scope", [{"organization_id": "org-1"}, {"duty_ids": [LOCKED]}, {}])
def test_a_duty_paused_over_scoped_runs_owes_nothing_that_became_owed_in_them(
    conn: Conn, invoke: Invoke, scope: dict[str, object]
) -> None:
    insert_duties(
        conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2", organization_id="org-2")]
    )
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    invoke({**clock_event(FIRST + DAY), **scope})
    invoke({**clock_event(FIRST + 2 * DAY), **scope})
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    # Two runs that covered the duty found it paused on the 21st and the 22nd.
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-23"]


def test_a_dry_run_counts_the_duties_advanced_as_the_run_at_its_clock_does(
    conn: Conn, invoke: Invoke
) -> None:
    # Reassigned: the new owner's task has the key last_dispatched_period holds.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = %s", (LOCKED,))
    clock = clock_event(FIRST + timedelta(hours=5))
    dry = invoke({**clock, "dry_run": True})
    real = invoke(clock)

    assert real["tasks_created"] == dry["tasks_would_create"] == 1
    assert real["duties_advanced"] == dry["duties_advanced"] == 0


@pytest.mark.parametrize(
    ("leave", "back"),
    [
        ("effective_from = date '2027-06-01'", "effective_from = NULL"),
        ("effective_to = date '2026-11-20'", "effective_to = NULL"),
    ],
    ids=["start deferred", "ended"],
)
def test_a_window_moved_away_and_back_owes_nothing_that_became_owed_outside_it(
    conn: Conn, invoke: Invoke, leave: str, back: str
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute(f"UPDATE duly_duty SET {leave} WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + DAY))
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute(f"UPDATE duly_duty SET {back} WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    # Back in its window after the 22nd's run: as a resumed duty, its current period.
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-23"]


def test_a_second_window_edit_judges_by_the_first_only_the_days_after_it(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_on_the_21st(conn, holder, invoke)
    # After the 21st's run: the window ends on the 20th, then starts on the
    # 1st, then ends never. The 21st became owed while the window held it;
    # the second edit's old window did not, but held only after the first.
    for edit in ("effective_to = '2026-11-20'", "effective_from = '2026-11-01'",
                 "effective_to = NULL"):  # fmt: skip
        conn.execute(f"UPDATE duly_duty SET {edit} WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-22"]


def test_a_window_extended_for_a_duty_no_run_kept_is_not_counted_when_it_owed_nothing(
    conn: Conn, invoke: Invoke
) -> None:
    # Added before any run, its window over by the first: no run keeps its
    # account, which owes from the origin (the 19th). Extended after the
    # 20th's run, it had no day in its window since: not changed while owed.
    insert_duties(
        conn,
        [duty(LOCKED, frequency="daily", lead_days=0, effective_to=date(2026, 11, 19))],
    )
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET effective_to = NULL WHERE id = %s", (LOCKED,))
    later = invoke(clock_event(FIRST + DAY))

    assert later["changed_while_owed"] == 0
    assert task_keys(conn, LOCKED) == ["2026-11-21"]


def test_a_window_that_ended_and_is_extended_owes_nothing_from_the_days_after_its_end(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [duty(LOCKED, frequency="daily", lead_days=0, effective_to=date(2026, 11, 20))],
    )
    for day in range(3):
        invoke(clock_event(FIRST + day * DAY))
    conn.execute("UPDATE duly_duty SET effective_to = NULL WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-23"]


def test_a_window_that_ended_and_is_extended_into_the_past_owes_nothing_from_those_days(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(
        conn,
        [duty(LOCKED, frequency="daily", lead_days=0, effective_to=date(2026, 11, 20))],
    )
    for day in range(3):
        invoke(clock_event(FIRST + day * DAY))
    # Still over on the 22nd, now ending on the 21st: the 21st became owed
    # while the window as it stood then held only the days to the 20th.
    conn.execute("UPDATE duly_duty SET effective_to = '2026-11-21' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 3 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20"]


def test_a_period_rolled_back_into_the_window_but_owed_after_its_end_is_not_created(
    conn: Conn, invoke: Invoke
) -> None:
    # The window ends on Friday 2026-02-27. March's due date, Sunday 03-01,
    # rolls back to that Friday, and so do the daily duty's weekend days;
    # each becomes owed on its first day, when the window had ended: owed
    # outside it, so never created, as on any day the window does not hold.
    rolled = {"due_roll": "preceding", "lead_days": 0, "effective_to": date(2026, 2, 27)}
    insert_duties(conn, [duty("m", **rolled), duty("d", frequency="daily", **rolled)])
    start = datetime(2026, 2, 25, 1, 0, tzinfo=UTC)
    for day in range(7):
        invoke(clock_event(start + day * DAY))

    assert task_keys(conn, "m") == ["2026-02"]
    assert task_keys(conn, "d") == ["2026-02-25", "2026-02-26", "2026-02-27"]


def test_a_period_rolled_back_into_the_window_but_owed_after_its_end_is_not_created_after_an_outage(
    conn: Conn, invoke: Invoke
) -> None:
    # As above, with the runs of the window's last day, the 28th and March 1
    # missed (inside the horizon): what became owed after the window's end
    # is not created, whatever the runs between.
    rolled = {"due_roll": "preceding", "lead_days": 0, "effective_to": date(2026, 2, 27)}
    insert_duties(conn, [duty("m", **rolled), duty("d", frequency="daily", **rolled)])
    start = datetime(2026, 2, 25, 1, 0, tzinfo=UTC)
    invoke(clock_event(start))
    invoke(clock_event(start + DAY))
    clock = clock_event(start + 5 * DAY)  # Monday 03-02
    dry = invoke({**clock, "dry_run": True})
    later = invoke(clock)

    assert task_keys(conn, "m") == ["2026-02"]
    assert task_keys(conn, "d") == ["2026-02-25", "2026-02-26", "2026-02-27"]
    assert dry["tasks_would_create"] == later["tasks_created"] == 1


def test_a_run_at_a_future_clock_creates_no_period_owed_after_the_window_ended(
    conn: Conn, invoke: Invoke
) -> None:
    # The window ends on the coming Friday; Saturday's and Sunday's due dates
    # roll back to it. A manual run at the Monday after: not owed.
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    friday = now.date() + timedelta(days=(4 - now.weekday()) % 7 or 7)
    rolled = {"due_roll": "preceding", "lead_days": 0, "effective_to": friday}
    insert_duties(conn, [duty(LOCKED, frequency="daily", **rolled)])
    invoke(clock_event(now))
    invoke(clock_event(datetime.combine(friday + 3 * DAY, datetime.min.time(), UTC)))

    assert not {str(friday + DAY), str(friday + 2 * DAY)} & set(task_keys(conn, LOCKED))


def test_a_period_a_lead_opened_before_the_window_began_is_owed_from_its_first_day(
    conn: Conn, invoke: Invoke
) -> None:
    # The lead (7 days) opens the 16th on the 9th, while the window (from the
    # 16th) had not begun: it becomes owed as the duty enters its window, so a
    # run missed on the 16th leaves it to the next, within the horizon.
    insert_duties(conn, [duty(LOCKED, frequency="daily", effective_from=date(2026, 11, 16))])
    first = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
    for day in range(15):  # the 1st to the 15th
        invoke(clock_event(first + day * DAY))
    after = invoke(clock_event(first + 16 * DAY))  # the 17th; the 16th's run missed

    assert after["beyond_horizon"] == 0
    assert task_keys(conn, LOCKED)[0] == "2026-11-16"


def test_a_period_begun_before_a_reopened_window_is_owed_as_the_window_opens_after_an_outage(
    conn: Conn, invoke: Invoke
) -> None:
    # The window ended on 03-08; on 03-10 it is reopened from Wednesday 03-11,
    # in the middle of week 11 (due Sunday 03-15). The runs of 03-11 to 03-15
    # are missed: week 11 became owed as the window opened, within the
    # horizon, so the run of 03-16 owes it though it is over.
    insert_duties(
        conn,
        [
            duty(
                LOCKED,
                frequency="weekly",
                due_anchor="period_end",
                lead_days=0,
                effective_to=date(2026, 3, 8),
            )
        ],
    )
    start = datetime(2026, 3, 7, 1, 0, tzinfo=UTC)
    for day in range(4):  # 03-07 to 03-10
        invoke(clock_event(start + day * DAY))
    conn.execute(
        "UPDATE duly_duty SET effective_from = '2026-03-11', effective_to = NULL WHERE id = %s",
        (LOCKED,),
    )
    clock = clock_event(start + 9 * DAY)  # 03-16
    dry = invoke({**clock, "dry_run": True})
    later = invoke(clock)

    assert "2026-W11" in task_keys(conn, LOCKED)
    assert dry["tasks_would_create"] == later["tasks_created"]


def test_a_window_whose_start_is_deferred_owes_from_that_start_when_it_comes(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET effective_from = '2026-11-24' WHERE id = %s", (LOCKED,))
    for day in range(2, 6):
        invoke(clock_event(FIRST + day * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-24", "2026-11-25"]


def test_a_window_moved_while_a_set_aside_day_is_owed_still_owes_it_if_it_holds_the_day(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    _set_aside_on_the_21st(conn, holder, invoke)
    # The 21st became owed in the window as it stood; the new one holds it too.
    conn.execute("UPDATE duly_duty SET effective_from = '2026-11-01' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-11-22"]


# Pacific/Kiritimati (+14) and Pacific/Pago_Pago (-11) read one instant 25
# hours apart: at 10:30 UTC the first is two local days ahead of the second.
AHEAD, BEHIND = "Pacific/Kiritimati", "Pacific/Pago_Pago"
HALF_PAST_TEN = datetime(2026, 11, 20, 10, 30, tzinfo=UTC)


def test_a_duty_moved_to_a_zone_whose_day_is_behind_owes_the_new_cadence_s_current_period(
    conn: Conn, invoke: Invoke
) -> None:
    # The run at 10:30 on the 22nd keeps the account on the 23rd in
    # Kiritimati; Pago Pago is still on the 21st, a Saturday. Moved there and
    # made weekly, the duty's current period at the next run is week 47.
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=AHEAD, lead_days=0)])
    for n in range(3):
        invoke(clock_event(HALF_PAST_TEN + n * DAY))
    conn.execute(
        "UPDATE duly_duty SET frequency = 'weekly', timezone = %s WHERE id = %s", (BEHIND, LOCKED)
    )
    invoke(clock_event(HALF_PAST_TEN + 3 * DAY))
    invoke(clock_event(HALF_PAST_TEN + 4 * DAY))

    assert [key for key in task_keys(conn, LOCKED) if "W" in key] == ["2026-W47", "2026-W48"]


def test_a_duty_moved_to_a_zone_whose_day_is_behind_and_reassigned_gives_the_new_owner_every_day(
    conn: Conn, invoke: Invoke
) -> None:
    # After the run at 10:30 on the 21st (the 22nd in Kiritimati, the 20th
    # in Pago Pago), the duty moves and changes hands; the hourly runs after
    # it find Pago Pago's 21st from 11:00 and its 22nd a day later.
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=AHEAD, lead_days=0)])
    invoke(clock_event(HALF_PAST_TEN), schedule_interval_hours=1)
    invoke(clock_event(HALF_PAST_TEN + DAY), schedule_interval_hours=1)
    conn.execute(
        "UPDATE duly_duty SET owner_id = 'owner-2', timezone = %s WHERE id = %s", (BEHIND, LOCKED)
    )
    for hours in (25, 49):
        invoke(clock_event(HALF_PAST_TEN + timedelta(hours=hours)), schedule_interval_hours=1)

    assert [key for key, owner in _owners(conn) if owner == "owner-2"] == [
        "2026-11-21",
        "2026-11-22",
    ]


def test_a_duty_reassigned_after_a_move_to_a_zone_whose_day_is_behind_owes_the_new_owner_today(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=AHEAD, lead_days=0)])
    invoke(clock_event(HALF_PAST_TEN))
    conn.execute("UPDATE duly_duty SET timezone = %s WHERE id = %s", (BEHIND, LOCKED))
    invoke(clock_event(HALF_PAST_TEN + DAY - timedelta(hours=2)))
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = %s", (LOCKED,))
    invoke(clock_event(HALF_PAST_TEN + DAY - timedelta(hours=1)))

    # 09:30 on the 21st is 22:30 on the 20th in Pago Pago: its current period.
    assert [key for key, owner in _owners(conn) if owner == "owner-2"] == ["2026-11-20"]


def _keys_of(conn: Conn, owner: str) -> list[str]:
    return [key for key, holder in _owners(conn) if holder == owner]


def test_a_move_ahead_and_back_gives_the_new_owner_the_current_period_at_the_next_run(
    conn: Conn, invoke: Invoke
) -> None:
    # 09:30 on the 20th is the 19th in Pago Pago and the 20th in Kiritimati:
    # the first move marks the change on Kiritimati's day, ahead of every
    # run's today once the duty is back, unless the second move re-expresses it.
    start = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=BEHIND, lead_days=0)])
    invoke(clock_event(start), schedule_interval_hours=1)
    conn.execute("UPDATE duly_duty SET timezone = %s WHERE id = %s", (AHEAD, LOCKED))
    conn.execute(
        "UPDATE duly_duty SET timezone = %s, owner_id = 'owner-2' WHERE id = %s", (BEHIND, LOCKED)
    )
    counts = [
        invoke(clock_event(start + hours * timedelta(hours=1)), schedule_interval_hours=1)[
            "changed_while_owed"
        ]
        for hours in (1, 2)
    ]

    assert _keys_of(conn, "owner-2") == ["2026-11-19", "2026-11-20"]
    # Moved ahead, the duty owed Kiritimati's 20th, after the account's day
    # (the 19th): the new owner replaced it before a run created it.
    assert counts == [1, 0]


def test_a_duty_resumed_then_moved_to_a_zone_whose_day_is_behind_owes_the_current_period(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=AHEAD, lead_days=0)])
    invoke(clock_event(HALF_PAST_TEN))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = %s", (LOCKED,))
    for n in (1, 2, 3):
        invoke(clock_event(HALF_PAST_TEN + n * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    conn.execute("UPDATE duly_duty SET timezone = %s WHERE id = %s", (BEHIND, LOCKED))
    invoke(clock_event(HALF_PAST_TEN + 4 * DAY))
    invoke(clock_event(HALF_PAST_TEN + 5 * DAY))

    # Resumed at 10:30 on the 23rd's run: the 23rd in Pago Pago is current.
    assert task_keys(conn, LOCKED) == ["2026-11-21", "2026-11-23", "2026-11-24"]


@pytest.mark.parametrize("zone", [BEHIND, "UTC"])
def test_a_set_aside_day_a_move_and_a_new_cadence_replace_is_counted_once(
    conn: Conn, holder: Conn, invoke: Invoke, zone: str
) -> None:
    # Kiritimati's 22nd was set aside, so owed; the duty then moves to a zone
    # whose day is not after the account's and is made weekly, in one edit or two.
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=AHEAD, lead_days=0)])
    invoke(clock_event(HALF_PAST_TEN))
    set_aside(holder, invoke, HALF_PAST_TEN + DAY, LOCKED)
    conn.execute(
        "UPDATE duly_duty SET frequency = 'weekly', timezone = %s WHERE id = %s", (zone, LOCKED)
    )
    together = [
        invoke(clock_event(HALF_PAST_TEN + n * DAY))["changed_while_owed"] for n in (2, 3, 4)
    ]

    assert together == [1, 0, 0]


def test_a_new_cadence_then_a_move_to_a_zone_whose_day_is_behind_is_counted_once(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=AHEAD, lead_days=0)])
    invoke(clock_event(HALF_PAST_TEN))
    set_aside(holder, invoke, HALF_PAST_TEN + DAY, LOCKED)
    conn.execute("UPDATE duly_duty SET frequency = 'weekly' WHERE id = %s", (LOCKED,))
    conn.execute("UPDATE duly_duty SET timezone = %s WHERE id = %s", (BEHIND, LOCKED))
    counts = [invoke(clock_event(HALF_PAST_TEN + n * DAY))["changed_while_owed"] for n in (2, 3, 4)]

    assert counts == [1, 0, 0]


def test_a_move_to_a_zone_whose_day_is_ahead_that_replaces_nothing_owed_is_not_counted(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=BEHIND, lead_days=0)])
    invoke(clock_event(HALF_PAST_TEN))
    conn.execute("UPDATE duly_duty SET timezone = %s WHERE id = %s", (AHEAD, LOCKED))
    moved = invoke(clock_event(HALF_PAST_TEN + DAY))

    assert moved["changed_while_owed"] == 0


_PAUSE = f"UPDATE duly_duty SET status = 'paused' WHERE id = '{LOCKED}'"
_RESUME = f"UPDATE duly_duty SET status = 'active' WHERE id = '{LOCKED}'"
_MOVE_AHEAD = f"UPDATE duly_duty SET timezone = '{AHEAD}' WHERE id = '{LOCKED}'"


@pytest.mark.parametrize(
    "edits",
    [
        [_MOVE_AHEAD],
        [_PAUSE, _RESUME, _MOVE_AHEAD],
        [_MOVE_AHEAD, _PAUSE, _RESUME],
        [_PAUSE, _MOVE_AHEAD, _RESUME],
    ],
    ids=["moved", "paused, resumed, moved", "moved, paused, resumed", "paused, moved, resumed"],
)
def test_a_pause_and_a_resume_around_a_move_ahead_at_one_clock_lose_no_day(
    conn: Conn, invoke: Invoke, edits: list[str]
) -> None:
    # The runs of the 20th and 21st (01:00 UTC) keep the account on Pago
    # Pago's 20th. Kiritimati's 21st began at 10:00 UTC on the 20th, before
    # the clock the edits are placed at: owed, whatever their order.
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=BEHIND, lead_days=0)])
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    for edit in edits:
        conn.execute(edit)
    invoke(clock_event(FIRST + 2 * DAY))

    # Before, paused, moved, resumed: 19, 20, 22 (the pause kept Pago Pago's day).
    assert task_keys(conn, LOCKED) == ["2026-11-19", "2026-11-20", "2026-11-21", "2026-11-22"]


@pytest.mark.parametrize(
    "edits", [[_MOVE_AHEAD, _PAUSE], [_PAUSE, _MOVE_AHEAD]], ids=["moved, paused", "paused, moved"]
)
def test_a_pause_and_a_move_ahead_at_one_clock_owe_the_same_whatever_their_order(
    conn: Conn, invoke: Invoke, edits: list[str]
) -> None:
    # Paused over the run of the 22nd and resumed after it: Kiritimati's
    # 21st became owed before the pause's clock; the 22nd while paused.
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=BEHIND, lead_days=0)])
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    for edit in edits:
        conn.execute(edit)
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute(_RESUME)
    invoke(clock_event(FIRST + 3 * DAY))

    # Before, paused then moved: 19, 20, 23.
    assert task_keys(conn, LOCKED) == ["2026-11-19", "2026-11-20", "2026-11-21", "2026-11-23"]


def test_a_duty_added_paused_then_moved_ahead_owes_nothing_from_before_its_resume(
    conn: Conn, invoke: Invoke
) -> None:
    # Added paused after the run of the 21st, moved to Kiritimati and resumed
    # at that clock: it was never dispatchable when Kiritimati's 21st began,
    # and that day is over by the run that reads it.
    insert_duties(conn, [duty("d2")])
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    insert_duties(
        conn, [duty(LOCKED, frequency="daily", timezone=BEHIND, lead_days=0, status="paused")]
    )
    conn.execute(_MOVE_AHEAD)
    conn.execute(_RESUME)
    invoke(clock_event(FIRST + 2 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-22"]


def test_a_paused_duty_moved_ahead_and_back_owes_no_day_that_began_while_paused(
    conn: Conn, invoke: Invoke
) -> None:
    # Paused after the run of the 21st (01:00 UTC: Pago Pago's 20th), moved
    # to Kiritimati, two runs, moved back to Pago Pago and resumed after the
    # run of the 23rd. Pago Pago's 21st began at 11:00 UTC on the 21st, after
    # the pause's clock: never owed, as without the round trip.
    insert_duties(conn, [duty(LOCKED, frequency="daily", timezone=BEHIND, lead_days=0)])
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    conn.execute(_PAUSE)
    conn.execute(_MOVE_AHEAD)
    invoke(clock_event(FIRST + 2 * DAY))
    invoke(clock_event(FIRST + 3 * DAY))
    conn.execute(f"UPDATE duly_duty SET timezone = '{BEHIND}' WHERE id = '{LOCKED}'")
    conn.execute(_RESUME)
    invoke(clock_event(FIRST + 4 * DAY))

    # At fd481e2: 19, 20, 21, 23 (the pause stayed on Kiritimati's 21st).
    assert task_keys(conn, LOCKED) == ["2026-11-19", "2026-11-20", "2026-11-23"]


def test_a_pause_before_a_clock_change_keeps_its_own_clock_s_day_in_the_zone_ahead(
    conn: Conn, invoke: Invoke
) -> None:
    # Daily runs at 22:30 UTC: 23:30 in Berlin until 03-29, 00:30 the next
    # day after. Paused after the run of 03-27 (Berlin's 27th then), moved to
    # Berlin after the run of 03-29 (Berlin's 30th then), resumed: Berlin's
    # 28th began after the pause, so it is not owed, nor are the 29th and
    # 30th; the 31st is the period current at the run that reads it.
    first = datetime(2026, 3, 25, 22, 30, tzinfo=UTC)
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    for n in range(3):
        invoke(clock_event(first + n * DAY))
    conn.execute(_PAUSE)
    for n in range(3, 5):
        invoke(clock_event(first + n * DAY))
    conn.execute(f"UPDATE duly_duty SET timezone = 'Europe/Berlin' WHERE id = '{LOCKED}'")
    conn.execute(_RESUME)
    invoke(clock_event(first + 5 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-03-25", "2026-03-26", "2026-03-27", "2026-03-31"]


def test_a_change_no_run_kept_is_not_counted_once_a_run_at_a_past_clock_keeps_the_account(
    conn: Conn, invoke: Invoke
) -> None:
    # Retired before any clock, so no run keeps its account; resumed and
    # reassigned after the run of the 20th. A run at a past clock (the 17th)
    # then keeps the account on the 17th, and the marks after it stay: the
    # reassignment replaced no owner that owed anything since (retired
    # until the resume on the 20th).
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, status="retired")])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = %s", (LOCKED,))
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST - 3 * DAY))
    following = invoke(clock_event(FIRST + DAY))

    # Before: 1 (found by the owed-periods state machine at soak size).
    assert following["changed_while_owed"] == 0


def test_a_change_s_period_that_is_over_by_the_run_that_reads_it_is_not_created(
    conn: Conn, invoke: Invoke
) -> None:
    # Made weekly on Saturday the 21st, after its run; Sunday's run missed:
    # Monday's run finds week 47 over, and creates week 48, current then.
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0)])
    invoke(clock_event(FIRST))
    invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET frequency = 'weekly' WHERE id = %s", (LOCKED,))
    monday = invoke(clock_event(FIRST + 3 * DAY))

    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-21", "2026-W48"]
    assert monday["changed_while_owed"] == 0


@pytest.mark.parametrize(
    "edit",
    [
        f"timezone = '{BEHIND}', effective_to = NULL",  # moved to a zone whose day is behind
        "timezone = 'Etc/GMT-14', effective_to = NULL",  # to one of the same day
        "frequency = 'weekly', effective_to = NULL",  # no zone edit
    ],
)
def test_a_window_that_ended_extended_in_the_edit_that_moves_its_zone_replaces_nothing_owed(
    conn: Conn, invoke: Invoke, edit: str
) -> None:
    insert_duties(
        conn,
        [
            duty(
                LOCKED,
                frequency="daily",
                timezone=AHEAD,
                lead_days=0,
                effective_to=date(2026, 11, 22),
            )
        ],
    )
    for n in range(3):
        invoke(clock_event(HALF_PAST_TEN + n * DAY))
    conn.execute(f"UPDATE duly_duty SET {edit} WHERE id = %s", (LOCKED,))
    counts = [invoke(clock_event(HALF_PAST_TEN + n * DAY))["changed_while_owed"] for n in (3, 4)]

    assert counts == [0, 0]


@pytest.mark.parametrize(
    ("start", "edit"),
    [
        pytest.param({"lead_days": 0}, "lead_days = 5", id="lead_raised"),
        pytest.param({"lead_days": 5, "status": "paused"}, "status = 'active'", id="resumed"),
    ],
)
def test_the_days_a_lead_opened_at_a_change_are_created_after_an_outage(
    conn: Conn, invoke: Invoke, start: dict[str, object], edit: str
) -> None:
    # A daily UTC duty, runs on 08-01 to 08-05, the edit after the last, no
    # run until 08-12 (its horizon 08-04). At the edit the duty owes, as if
    # they became owed then, the days its lead of 5 opened: 08-06 to 08-10,
    # which a lead of 0 would have owed on their own days all the same.
    first = datetime(2026, 8, 1, 1, 0, tzinfo=UTC)
    insert_duties(conn, [duty(LOCKED, frequency="daily", **start)])
    for day in range(5):
        invoke(clock_event(first + day * DAY))
    conn.execute(f"UPDATE duly_duty SET {edit} WHERE id = %s", (LOCKED,))
    after = invoke(clock_event(first + 11 * DAY))

    # Before: 08-06 to 08-10 never created, and nothing counted them.
    made = [(first + day * DAY).date().isoformat() for day in range(17)]
    assert task_keys(conn, LOCKED) == (made if "lead_days" in edit else made[5:])
    assert (after["beyond_horizon"], after["degraded"]) == (0, False)


def test_a_run_whose_clock_is_read_a_little_ahead_of_the_database_s_is_the_latest_clock(
    conn: Conn, settings: Any, connections: Any
) -> None:
    # A console test invocation ({}) takes its clock from Lambda's own time,
    # which may run a moment ahead of the database's: the run is still the
    # latest scheduled clock its edits are placed at, as it keeps accounts.
    now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0, owner_id="alice")])
    ahead = runtime_for(None, settings, connections, clock=lambda: now + timedelta(seconds=2))
    handle(clock_event(today - DAY + timedelta(hours=1)), None, ahead)
    handle({}, None, ahead)
    conn.execute("UPDATE duly_duty SET owner_id = 'bob' WHERE id = %s", (LOCKED,))
    tomorrow = today + DAY + timedelta(hours=1)
    handle(clock_event(tomorrow), None, replace(ahead, clock=lambda: tomorrow))

    # The new owner gets the period current at the run that reads it. Before:
    # today's as well, the edit placed at yesterday's clock.
    bob = conn.execute("SELECT period_key FROM duly_task WHERE owner_id = 'bob'").fetchall()
    assert [key for (key,) in bob] == [tomorrow.date().isoformat()]


def _owners_of(conn: Conn, duty_id: str) -> set[tuple[str, str]]:
    rows = conn.execute("SELECT owner_id, period_key FROM duly_task WHERE duty_id = %s", [duty_id])
    return {(str(owner), str(key)) for owner, key in rows.fetchall()}


def _explained(invoke: Invoke, at: datetime) -> dict[str, str]:
    answer = invoke({"query": "explain", "duty_id": "d1", **clock_event(at)})["explain"]
    return {c["period_key"]: c.get("reason", c["verdict"]) for c in answer["candidates"]}


@pytest.mark.parametrize("frequency", ["monthly", "quarterly"])
@pytest.mark.parametrize(
    ("edit", "left"),
    [
        ("effective_to = '2026-11-22', owner_id = 'bob'", {"alice"}),
        ("effective_to = '2026-11-22'", set()),
    ],
    ids=["closed with a new owner", "closed, its task deleted"],
)
def test_a_change_placed_after_the_window_s_last_day_owes_nothing_in_it(
    conn: Conn, invoke: Invoke, frequency: str, edit: str, left: set[str]
) -> None:
    # Created on the 20th; the runs of the 21st to the 24th have nothing to
    # read of it, so its account stays on the 20th. Then one edit closes its
    # window on the 22nd: the edit's day (the 24th) is after the window's
    # last day, and a change owes as of its day (docs/contract.md#account).
    insert_duties(conn, [duty("d1", frequency=frequency, lead_days=0, owner_id="alice")])
    for n in range(5):
        invoke(clock_event(FIRST + n * DAY))
    if not left:
        conn.execute("DELETE FROM duly_task")
    conn.execute(f"UPDATE duly_duty SET {edit} WHERE id = 'd1'")
    current = "2026-11" if frequency == "monthly" else "2026-Q4"
    asked = _explained(invoke, FIRST + 5 * DAY)
    invoke(clock_event(FIRST + 5 * DAY))

    # Before: bob's (or the deleted alice's) current period created, and
    # explain said would_create.
    assert _owners_of(conn, "d1") == {(owner, current) for owner in left}
    assert asked[current] == "dispatched"


@pytest.mark.parametrize(
    ("leave", "back"),
    [
        ("status = 'paused'", "status = 'active'"),
        ("review_status = 'to_review'", "review_status = 'approved'"),
    ],
    ids=["resumed", "approved"],
)
def test_a_duty_made_dispatchable_after_its_window_ended_owes_nothing(
    conn: Conn, invoke: Invoke, leave: str, back: str
) -> None:
    # Paused on the 20th, its window ending on the 22nd, its owner changed
    # while paused; resumed on the 24th, after its window's last day.
    insert_duties(
        conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=date(2026, 11, 22))]
    )
    invoke(clock_event(FIRST))
    conn.execute(f"UPDATE duly_duty SET {leave}, owner_id = 'bob' WHERE id = 'd1'")
    for n in range(1, 5):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute(f"UPDATE duly_duty SET {back} WHERE id = 'd1'")
    invoke(clock_event(FIRST + 5 * DAY))

    # Before: bob's 2026-11 created.
    assert _owners_of(conn, "d1") == {("alice", "2026-11")}


def test_a_change_in_the_window_keeps_what_it_owes_past_a_fix_after_the_window_ended(
    conn: Conn, invoke: Invoke
) -> None:
    # A new owner on the 20th, in a window ending on the 22nd, and a zone no
    # run knows in the same edit: the runs of the 21st to the 23rd fault it.
    # The fix comes after the window's last day; the owner change, inside it,
    # still gives bob the current period.
    insert_duties(
        conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=date(2026, 11, 22))]
    )
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET owner_id = 'bob', timezone = 'Mars/Olympus' WHERE id = 'd1'")
    faulted = [invoke(clock_event(FIRST + n * DAY)) for n in range(1, 4)]
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'd1'")
    invoke(clock_event(FIRST + 4 * DAY))

    assert [run["fault_counts"]["invalid_cadence"] for run in faulted] == [1, 1, 1]
    assert _owners_of(conn, "d1") == {("alice", "2026-11"), ("bob", "2026-11")}


@pytest.mark.parametrize("before_any_run", [True, False], ids=["no run kept", "new"])
def test_a_new_duty_faulty_until_after_its_window_ended_gets_its_current_period(
    conn: Conn, invoke: Invoke, before_any_run: bool
) -> None:
    broken = duty("d1", lead_days=0, timezone="Mars/Olympus", effective_to=date(2026, 11, 22))
    if before_any_run:
        insert_duties(conn, [broken])
    invoke(clock_event(FIRST))
    if not before_any_run:
        insert_duties(conn, [broken])
    for n in range(1, 4):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'd1'")
    invoke(clock_event(FIRST + 4 * DAY))

    assert task_keys(conn, "d1") == ["2026-11"]


def _would_create(invoke: Invoke, at: datetime) -> set[str]:
    answer = invoke({"query": "explain", "duty_id": "d1", **clock_event(at)})["explain"]
    return {c["period_key"] for c in answer["candidates"] if c["verdict"] == "would_create"}


def _daily(window_to: date, **fields: Any) -> dict[str, Any]:
    """d1: a daily UTC duty of alice's, lead 0, its window ending on ``window_to``."""
    return duty(
        "d1", frequency="daily", lead_days=0, owner_id="alice", effective_to=window_to, **fields
    )


@pytest.mark.parametrize(
    "how",
    ["owner changed, then paused", "added paused", "added for review", "added paused, no run kept"],
)
def test_a_duty_made_dispatchable_after_its_window_ended_owes_nothing_from_its_pause(
    conn: Conn, invoke: Invoke, how: str
) -> None:
    # Not dispatchable from the 20th (after an owner change in the window, or
    # from its addition), made dispatchable on the 24th, after its window's
    # last day (the 22nd). A change mark from before the pause stays, and
    # what became owed after it is the account's: the pause bounds it.
    window = date(2026, 11, 22)
    if how == "added paused, no run kept":
        insert_duties(conn, [_daily(window, status="paused")])
    invoke(clock_event(FIRST))
    if how == "owner changed, then paused":
        insert_duties(conn, [_daily(window)])
        invoke(clock_event(FIRST + timedelta(hours=1)))  # alice's 2026-11-20
        conn.execute("UPDATE duly_duty SET owner_id = 'bob' WHERE id = 'd1'")
        conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = 'd1'")
    elif how == "added paused":
        insert_duties(conn, [_daily(window, status="paused")])
    elif how == "added for review":
        insert_duties(conn, [_daily(window, review_status="to_review")])
    for n in range(1, 5):
        invoke(clock_event(FIRST + n * DAY))
    back = "review_status = 'approved'" if how == "added for review" else "status = 'active'"
    conn.execute(f"UPDATE duly_duty SET {back} WHERE id = 'd1'")
    asked = _would_create(invoke, FIRST + 5 * DAY)
    invoke(clock_event(FIRST + 5 * DAY))

    # At 3ebb3ac (the older mark left, the run owing all after it):
    # 2026-11-21 and 2026-11-22 created, 2026-11-20 too where no run kept
    # the account, and explain said would_create; before it, the resume's
    # mark owed nothing in the window.
    paid = {("alice", "2026-11-20")} if how == "owner changed, then paused" else set()
    assert (_owners_of(conn, "d1"), asked) == (paid, set())


def test_a_window_extended_after_it_ended_owes_nothing_from_the_days_between(
    conn: Conn, invoke: Invoke
) -> None:
    # Window ending on the 21st. After the run of the 20th: a new owner and a
    # zone no run knows (marked on the 20th); faulted from the 21st to the
    # 24th. Then the zone is fixed and the window extended to the 23rd, an
    # edit placed after the new window's last day: the 20th's mark stays.
    insert_duties(conn, [_daily(date(2026, 11, 21))])
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET owner_id = 'bob', timezone = 'Mars/Olympus' WHERE id = 'd1'")
    for n in range(1, 5):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute(
        "UPDATE duly_duty SET timezone = 'UTC', effective_to = '2026-11-23' WHERE id = 'd1'"
    )
    asked = _would_create(invoke, FIRST + 5 * DAY)
    invoke(clock_event(FIRST + 5 * DAY))

    # The 21st, in the window while faulted, is owed; the 22nd and 23rd,
    # which the window did not hold until the edit, are not. At 3ebb3ac:
    # bob's 2026-11-22 and 2026-11-23 created too.
    assert _owners_of(conn, "d1") == {("alice", "2026-11-20"), ("bob", "2026-11-21")}
    assert asked == {"2026-11-21"}


@pytest.mark.parametrize("edit", ["resumed", "window extended"])
def test_a_run_at_a_past_clock_keeps_a_pause_an_edit_after_the_window_left_unmarked(
    conn: Conn, invoke: Invoke, edit: str
) -> None:
    if edit == "resumed":
        # Window ending on the 24th; paused on the 20th, resumed on the 26th.
        insert_duties(conn, [_daily(date(2026, 11, 24))])
        invoke(clock_event(FIRST))
        conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = 'd1'")
        for n in range(1, 7):
            invoke(clock_event(FIRST + n * DAY))
        conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd1'")
        paid = {("alice", "2026-11-20")}
    else:
        # Window ending on the 21st, extended on the 25th to the 24th.
        insert_duties(conn, [_daily(date(2026, 11, 21))])
        for n in range(6):
            invoke(clock_event(FIRST + n * DAY))
        conn.execute("UPDATE duly_duty SET effective_to = '2026-11-24' WHERE id = 'd1'")
        paid = {("alice", "2026-11-20"), ("alice", "2026-11-21")}
    # A manual run at a past clock (the 22nd, or the 23rd), then the next
    # scheduled run.
    past = invoke(clock_event(FIRST + (2 if edit == "resumed" else 3) * DAY))
    invoke(clock_event(FIRST + 7 * DAY))

    # At 3ebb3ac: the past run kept the account and dropped the pause, which
    # only a change mark after its today kept; the scheduled run then created
    # 2026-11-23 and 2026-11-24 (resumed) or 2026-11-24 (window extended).
    assert past["tasks_created"] == 0
    assert _owners_of(conn, "d1") == paid


@pytest.mark.parametrize(
    ("held", "release"),
    [
        ({"review_status": "to_review"}, "review_status = 'approved'"),
        ({"status": "paused"}, "status = 'active'"),
    ],
    ids=["approved", "resumed"],
)
def test_a_duty_added_held_and_released_after_its_window_ended_owes_nothing(
    conn: Conn, invoke: Invoke, held: dict[str, str], release: str
) -> None:
    invoke(clock_event(FIRST))
    insert_duties(
        conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=date(2026, 11, 22), **held)]
    )
    for n in range(1, 5):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute(f"UPDATE duly_duty SET {release} WHERE id = 'd1'")
    invoke(clock_event(FIRST + 5 * DAY))

    # Before: alice's 2026-11, owed by the release's mark (at 3ebb3ac, by
    # that of its addition).
    assert _owners_of(conn, "d1") == set()


@pytest.mark.parametrize(
    "window_to", [date(2026, 11, 19), date(2026, 11, 22)], ids=["on the origin", "after it"]
)
@pytest.mark.parametrize(
    ("held", "release"),
    [
        ({"review_status": "to_review"}, "review_status = 'approved'"),
        ({"status": "paused"}, "status = 'active'"),
    ],
    ids=["approved", "resumed"],
)
def test_a_duty_held_before_any_run_and_released_after_its_window_ended_owes_nothing(
    conn: Conn, invoke: Invoke, window_to: date, held: dict[str, str], release: str
) -> None:
    # Added held before the first run (its origin: the 19th), passed over by
    # the runs of the 20th to the 23rd, released on the 23rd, after its
    # window's last day. Held at the origin, it owed nothing there.
    insert_duties(conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=window_to, **held)])
    for n in range(4):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute(f"UPDATE duly_duty SET {release} WHERE id = 'd1'")
    asked = _would_create(invoke, FIRST + 4 * DAY)
    invoke(clock_event(FIRST + 4 * DAY))

    # Before: alice's 2026-11 created, and explain said would_create, owed
    # as of the origin.
    assert (_owners_of(conn, "d1"), asked) == (set(), set())


@pytest.mark.parametrize(
    "how", ["set aside by a scoped run", "faulted by a scoped run", "zone moved ahead while paused"]
)
def test_a_duty_no_run_kept_paused_after_the_origin_s_period_became_owed_still_owes_it(
    conn: Conn, holder: Conn, invoke: Invoke, how: str
) -> None:
    # Added before any run, its window ending on 11-25. A run reads it and
    # passes it over (a run scoped to its organisation on 11-10, before the
    # first unscoped run on 11-20 whose origin is 11-19; or that first run,
    # in UTC-12, after which it moves to UTC+14, whose origin day is then
    # after the pause's). Paused after that run, resumed on 11-26, after the
    # window ended: 2026-11 became owed on 11-01, before the pause, and the
    # run that read it owed it (docs/contract.md#account).
    zone = "Mars/Olympus" if how.startswith("faulted") else "UTC"
    at = datetime(2026, 11, 10, 1, 0, tzinfo=UTC)
    if how.startswith("zone"):
        zone, at = "Etc/GMT+12", datetime(2026, 11, 20, 11, 0, tzinfo=UTC)
    insert_duties(
        conn,
        [duty("d1", lead_days=0, owner_id="alice", timezone=zone, effective_to=date(2026, 11, 25))],
    )
    scope = {} if how.startswith("zone") else {"organization_id": "org-1"}
    if how.startswith("faulted"):
        assert invoke({**clock_event(at), **scope})["fault_counts"]["invalid_cadence"] == 1
    else:
        holder.execute("SELECT id FROM duly_duty WHERE id = 'd1' FOR UPDATE")
        locked = invoke({**clock_event(at), **scope}, lock_timeout_ms=200)
        holder.rollback()
        assert [each["duty_id"] for each in locked["set_aside"]] == ["d1"]
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = 'd1'")
    later = {
        "faulted by a scoped run": "UTC",
        "zone moved ahead while paused": "Pacific/Kiritimati",
    }
    if how in later:
        conn.execute("UPDATE duly_duty SET timezone = %s WHERE id = 'd1'", [later[how]])
    first = at + DAY if how.startswith("zone") else FIRST
    for n in range(7):
        invoke(clock_event(first + n * DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd1'")
    asked = _would_create(invoke, first + 7 * DAY)
    invoke(clock_event(first + 7 * DAY))

    # At fea5495: nothing created, and explain said not_dispatchable (the
    # origin after the pause's day).
    assert (_owners_of(conn, "d1"), asked) == ({("alice", "2026-11")}, {"2026-11"})


@pytest.mark.parametrize("rules", ["new", "same"])
def test_a_run_under_new_rules_owes_nothing_in_a_window_that_ended_on_the_account_s_day(
    conn: Conn, invoke: Invoke, rules: str
) -> None:
    # Quarterly, its window ending on 10-01, the day 2026-Q4 begins: that
    # day's run creates alice's Q4 and keeps the account through 10-01. Bob
    # takes it on 10-05, after the window's last day, which owes nothing in
    # it; nor does the first run under new rules, on 11-10, after it too.
    insert_duties(
        conn,
        [
            duty(
                "d1",
                frequency="quarterly",
                lead_days=0,
                owner_id="alice",
                effective_to=date(2026, 10, 1),
            )
        ],
    )
    first = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
    for n in range(3):
        invoke(clock_event(first + n * DAY))
    conn.execute("UPDATE duly_duty SET owner_id = 'bob' WHERE id = 'd1'")
    invoke(clock_event(datetime(2026, 10, 6, 1, 0, tzinfo=UTC)))
    if rules == "new":
        conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    at = datetime(2026, 11, 10, 1, 0, tzinfo=UTC)
    asked = _would_create(invoke, at)
    report = invoke(clock_event(at))

    # At cefce00, under new rules: bob's 2026-Q4 created, and explain said
    # would_create, the account's day taken for a change on the window's.
    # (Under the same rules the run does not read it: nothing owed.)
    assert _owners_of(conn, "d1") == {("alice", "2026-Q3"), ("alice", "2026-Q4")}
    assert asked == set()
    assert report["skipped"]["outside_effective_window"] == (1 if rules == "new" else 0)


@pytest.mark.parametrize("window_to", [date(2026, 11, 20), date(2026, 11, 22)])
def test_a_run_under_new_rules_after_the_window_ended_re_creates_no_deleted_task(
    conn: Conn, invoke: Invoke, window_to: date
) -> None:
    # The run of the 20th creates alice's 2026-11 and keeps the account
    # there; the runs to the window's end owe nothing more. The task is
    # deleted, and the first run after the window is the first under new
    # rules: they owe afresh as of its day, after the window ended.
    insert_duties(conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=window_to)])
    for n in range(3):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute("DELETE FROM duly_task")
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    asked = _would_create(invoke, FIRST + 4 * DAY)
    report = invoke(clock_event(FIRST + 4 * DAY))

    # Before, with the window ending on the 22nd: 2026-11 created again, and
    # explain said would_create.
    assert (report["tasks_created"], asked) == (0, set())


@pytest.mark.parametrize(
    "how",
    [
        "as it stands",
        "the rules new again",
        "its account on the window's last day",
        "set aside again",
    ],
)
def test_a_duty_set_aside_by_a_run_under_new_rules_in_its_window_is_owed_that_judgement(
    conn: Conn, holder: Conn, invoke: Invoke, how: str
) -> None:
    # Its task deleted, a run on its window's last day (the 21st), the first
    # under new rules, finds its row locked: the next run, after the window,
    # still owes the judgement that run could not give (its account on the
    # 20th, or kept through the 21st by that day's earlier run), under the
    # same rules or new ones again.
    insert_duties(
        conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=date(2026, 11, 21))]
    )
    invoke(clock_event(FIRST))
    at = FIRST + DAY
    if how == "its account on the window's last day":
        conn.execute("UPDATE duly_duty SET owner_id = 'bob' WHERE id = 'd1'")
        invoke(clock_event(at))  # bob's 2026-11, the account through the 21st
        at += timedelta(hours=12)
    conn.execute("DELETE FROM duly_task")
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    set_aside(holder, invoke, at, "d1")
    if how == "the rules new again":
        conn.execute("UPDATE duly_dispatch_run SET rules = 'tzdata 2019a; holidays 0; owed 0'")
    last = FIRST + 2 * DAY
    if how == "set aside again":
        set_aside(holder, invoke, last, "d1")  # after the window: still owed the 21st's
        last += DAY
    asked = _would_create(invoke, last)
    invoke(clock_event(last))

    # At e0db7f5: nothing created, and explain said nothing would be; at
    # 68a3011, with the rules new again, the same, and with the account on
    # the window's last day explain said would_create and the run created
    # nothing; at 28a2948, set aside again, nothing.
    assert (task_keys(conn, "d1"), asked) == (["2026-11"], {"2026-11"})


def test_a_duty_set_aside_by_a_run_under_new_rules_after_its_window_is_owed_nothing_in_it(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # The window ends on the 22nd, the account on the 20th; the task is
    # deleted and the first run under new rules, on the 23rd, sets the duty
    # aside: its judgement owed nothing in the window, nor does the next run.
    insert_duties(
        conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=date(2026, 11, 22))]
    )
    for n in range(3):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute("DELETE FROM duly_task")
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    set_aside(holder, invoke, FIRST + 3 * DAY, "d1")
    asked = _would_create(invoke, FIRST + 4 * DAY)
    invoke(clock_event(FIRST + 4 * DAY))

    # At 68a3011: 2026-11 created again, and explain said would_create.
    assert (task_keys(conn, "d1"), asked) == ([], set())


@pytest.mark.parametrize("refused_again", [False, True], ids=["mended", "refused again first"])
def test_a_duty_the_server_refused_under_new_rules_is_owed_that_judgement_once_mended(
    conn: Conn, invoke: Invoke, refused_again: bool
) -> None:
    # Its task deleted, the first run under new rules finds the server
    # refusing the duty's row (a rule added to duly_task later): a fault.
    # The rule is dropped, the duty's row never edited: the next run still
    # owes the judgement the refused run could not give, as for a duty that
    # run set aside, and still if a run between refused it again.
    insert_duties(conn, [duty(LOCKED), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task WHERE duty_id = %s", (LOCKED,))
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    conn.execute(f"ALTER TABLE duly_task ADD CONSTRAINT no_d1 CHECK (subject <> 'Duty {LOCKED}')")
    refused = invoke(clock_event(FIRST + DAY))
    at = FIRST + 2 * DAY
    if refused_again:
        assert invoke(clock_event(at))["faults"] == refused["faults"]
        at += DAY
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_d1")
    asked = _would_create(invoke, at)
    mended = invoke(clock_event(at))

    assert [fault["duty_id"] for fault in refused["faults"]] == [LOCKED]
    # Before: [] and set(): the refused run counted as having judged it
    # afresh, and the next run, its rules the same, never read the monthly duty.
    assert (task_keys(conn, LOCKED), asked) == (["2026-11"], {"2026-11"})
    assert (mended["tasks_created"], mended["faults"]) == (1, [])


@pytest.mark.parametrize("explained", [False, True], ids=["created", "explained"])
def test_a_new_owner_on_the_window_s_last_day_gets_the_period_that_day_began(
    conn: Conn, invoke: Invoke, explained: bool
) -> None:
    # The window ends on 12-01, the day 2026-12 begins: that day's run
    # creates it for alice and keeps the account through 12-01. Bob takes
    # the duty after that run, on the window's last day: a change in the
    # window gives him the current period (docs/contract.md#account).
    insert_duties(conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=date(2026, 12, 1))])
    first = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
    invoke(clock_event(first))
    invoke(clock_event(first + DAY))
    conn.execute("UPDATE duly_duty SET owner_id = 'bob' WHERE id = 'd1'")
    if explained:
        # Before: no candidate, the duty outside its effective window.
        assert _would_create(invoke, first + 2 * DAY) == {"2026-12"}
        return
    invoke(clock_event(first + 2 * DAY))

    # Before: bob's 2026-12 not created (outside_effective_window).
    created = {("alice", "2026-11"), ("alice", "2026-12"), ("bob", "2026-12")}
    assert _owners_of(conn, "d1") == created


def test_a_duty_whose_window_ends_on_the_origin_s_day_gets_its_current_period(
    conn: Conn, invoke: Invoke
) -> None:
    # No run kept an account before the first run on 11-23, whose origin is
    # the scheduled clock before it, on 11-22: the window's last day. The
    # duty existed then and owes its current period, as a new duty would.
    insert_duties(
        conn, [duty("d1", lead_days=0, owner_id="alice", effective_to=date(2026, 11, 22))]
    )
    invoke(clock_event(datetime(2026, 11, 23, 1, 0, tzinfo=UTC)))

    # Before: nothing created (outside_effective_window).
    assert _owners_of(conn, "d1") == {("alice", "2026-11")}


_MIGRATIONS = Path(__file__).resolve().parents[2] / "src" / "dispatch_fn" / "db" / "migrations"


def _account_mark_of(migration: str) -> str:
    """The ``CREATE OR REPLACE FUNCTION duly_duty_account_mark()`` statement of ``migration``."""
    text = (_MIGRATIONS / migration).read_text("utf-8")
    found = re.search(
        r"CREATE OR REPLACE FUNCTION duly_duty_account_mark\(\).*?\n\$\$;", text, re.S
    )
    assert found is not None
    return found.group(0)


def _latest_account_mark() -> str:
    marking = [
        path.name
        for path in sorted(_MIGRATIONS.glob("0*.sql"))
        if "duly_duty_account_mark()" in path.read_text("utf-8")
    ]
    return _account_mark_of(marking[-1])


def test_a_duty_of_an_unknown_form_paused_by_the_old_trigger_owes_what_follows_its_fix(
    conn: Conn, invoke: Invoke
) -> None:
    # Made of a form no run knows under the trigger before migration 0021,
    # which marked that a pause; 0021 rewrote no row, so the duty keeps it.
    # Fixed after the 23rd's run: it owes its current period and what
    # follows (docs/contract.md#account). 2026-12 becomes owed on the 24th
    # (lead 7).
    insert_duties(conn, [duty("d1", frequency="monthly", lead_days=7)])
    invoke(clock_event(FIRST))
    conn.execute(_account_mark_of("0019_window_edits.sql"))
    conn.execute("UPDATE duly_duty SET form = 'recurrin' WHERE id = 'd1'")
    conn.execute(_latest_account_mark())
    for n in range(1, 4):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute("UPDATE duly_duty SET form = 'recurring' WHERE id = 'd1'")
    asked = _would_create(invoke, FIRST + 4 * DAY)
    for n in range(4, 12):
        invoke(clock_event(FIRST + n * DAY))

    # At de764a3: 2026-12 never created (explain: not_dispatchable).
    assert asked == {"2026-12"}
    assert task_keys(conn, "d1") == ["2026-11", "2026-12"]


def test_a_duty_of_an_unknown_form_paused_by_the_old_trigger_after_a_resume_owes_again_once_fixed(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Under the trigger before 0021: dispatched on the 20th, paused and
    # resumed, set aside on the 21st, then made of an unknown form (a pause
    # that closes the resume's span on the 21st). Fixed after the 23rd's run.
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute(_account_mark_of("0019_window_edits.sql"))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = 'd1'")
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd1'")
    set_aside(holder, invoke, FIRST + DAY, "d1")
    conn.execute("UPDATE duly_duty SET form = 'recurrin' WHERE id = 'd1'")
    conn.execute(_latest_account_mark())
    for n in range(2, 4):
        invoke(clock_event(FIRST + n * DAY))
    conn.execute("UPDATE duly_duty SET form = 'recurring' WHERE id = 'd1'")
    for n in range(4, 9):
        invoke(clock_event(FIRST + n * DAY))
    paused = conn.execute("SELECT dispatch_paused_on FROM duly_duty WHERE id = 'd1'").fetchone()

    # At de764a3: only the 20th and 21st; every run kept the pause at its
    # today (no span open), so the duty never owed again.
    assert task_keys(conn, "d1") == [
        "2026-11-20",
        "2026-11-21",
        "2026-11-24",
        "2026-11-25",
        "2026-11-26",
        "2026-11-27",
        "2026-11-28",
    ]
    assert paused == (None,)


def test_a_fault_a_scoped_run_found_fixed_before_the_first_unscoped_run_owes_the_days_between(
    conn: Conn, invoke: Invoke
) -> None:
    # Added before any run with a zone no run knows; a run scoped to its
    # organisation faults it on the 20th, the zone is fixed then (the change
    # marked on the 20th); the first unscoped run is on the 24th (origin: the
    # 23rd).
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0, timezone="Mars/Olympus")])
    scoped = invoke({**clock_event(FIRST), "organization_id": "org-1"})
    conn.execute("UPDATE duly_duty SET timezone = 'UTC' WHERE id = 'd1'")
    asked = _would_create(invoke, FIRST + 4 * DAY)
    invoke(clock_event(FIRST + 4 * DAY))

    # At de764a3: only 2026-11-24 (explain agreeing).
    assert scoped["fault_counts"]["invalid_cadence"] == 1
    assert asked == {"2026-11-21", "2026-11-22", "2026-11-23", "2026-11-24"}
    assert task_keys(conn, "d1") == ["2026-11-21", "2026-11-22", "2026-11-23", "2026-11-24"]


def test_a_duty_refused_under_new_rules_in_a_chain_s_first_link_is_owed_that_judgement(
    conn: Conn, invoke: Invoke
) -> None:
    insert_duties(conn, [duty(LOCKED), duty("d2"), duty("d3"), duty("d4")])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task WHERE duty_id = %s", (LOCKED,))
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    conn.execute(f"ALTER TABLE duly_task ADD CONSTRAINT no_d1 CHECK (subject <> 'Duty {LOCKED}')")
    pages: list[bool] = []

    def after_one_page() -> bool:
        pages.append(True)
        return len(pages) > 1

    first = dispatch_recorded(
        [conn],
        RunRequest(now=FIRST + DAY),
        runtime(chunk_size=2, workers=1, should_stop=after_one_page),
    )
    assert (first.report.complete, first.report.last_duty_id) == (False, "d2")
    assert [each.duty_id for each in first.report.faults] == [LOCKED]
    rest = dispatch_recorded(
        [conn],
        RunRequest(now=FIRST + DAY, scope=Scope(resume_after="d2"), continuation=1),
        runtime(),
    )
    assert rest.report.complete
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_d1")
    at = FIRST + 2 * DAY
    asked = _would_create(invoke, at)
    mended = invoke(clock_event(at))

    assert (task_keys(conn, LOCKED), asked) == (["2026-11"], {"2026-11"})
    assert (mended["tasks_created"], mended["faults"]) == (1, [])


@pytest.mark.parametrize(
    "edit",
    [
        "name = 'Duty renamed'",
        "owner_id = 'owner-2'",
        "frequency = 'weekly'",
        "lead_days = 20",
        "effective_to = '2026-11-21'",
        "timezone = 'Pacific/Kiritimati'",
    ],
)
@pytest.mark.parametrize("again", [False, True], ids=["mended", "refused again first"])
def test_explain_agrees_with_the_run_on_a_refused_duty_edited_before_it_is_mended(
    conn: Conn, invoke: Invoke, edit: str, again: bool
) -> None:
    insert_duties(conn, [duty(LOCKED), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task WHERE duty_id = %s", (LOCKED,))
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    conn.execute(f"ALTER TABLE duly_task ADD CONSTRAINT no_d1 CHECK (duty_id <> '{LOCKED}')")
    invoke(clock_event(FIRST + DAY))
    at = FIRST + 2 * DAY
    if again:
        invoke(clock_event(at))
        at += DAY
    conn.execute(f"UPDATE duly_duty SET {edit} WHERE id = %s", (LOCKED,))
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_d1")
    before = set(task_keys(conn, LOCKED))
    asked = _would_create(invoke, at)
    run = invoke(clock_event(at))

    assert set(task_keys(conn, LOCKED)) - before == asked
    assert run["faults"] == []


@pytest.mark.parametrize("redelivered", [False, True])
def test_a_duty_refused_across_several_rule_changes_is_owed_its_judgement_once_mended(
    conn: Conn, invoke: Invoke, redelivered: bool
) -> None:
    insert_duties(conn, [duty(LOCKED), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task WHERE duty_id = %s", (LOCKED,))
    conn.execute(f"ALTER TABLE duly_task ADD CONSTRAINT no_d1 CHECK (duty_id <> '{LOCKED}')")
    at = FIRST
    since = []
    for n in range(3):
        at += DAY
        conn.execute("UPDATE duly_dispatch_run SET rules = %s", (f"tzdata 20{n}0a; holidays 0",))
        refused = invoke(clock_event(at))
        assert [f["duty_id"] for f in refused["faults"]] == [LOCKED]
        if redelivered:
            assert [f["duty_id"] for f in invoke(clock_event(at))["faults"]] == [LOCKED]
        since.append(conn.execute("SELECT since_run FROM duly_dispatch_fault").fetchall())
    at += DAY
    assert [f["duty_id"] for f in invoke(clock_event(at))["faults"]] == [LOCKED]
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_d1")
    at += DAY
    asked = _would_create(invoke, at)
    mended = invoke(clock_event(at))

    assert since[0] == since[1] == since[2]
    # 11-25: 2026-12 became owed on 11-24 (lead 7); 2026-11 by the judgement owed.
    assert (task_keys(conn, LOCKED), asked) == (["2026-11", "2026-12"], {"2026-11", "2026-12"})
    assert (mended["tasks_created"], mended["faults"]) == (2, [])
    assert conn.execute("SELECT count(*) FROM duly_dispatch_fault").fetchone() == (0,)


@pytest.mark.parametrize(
    ("leave", "back"),
    [
        ("status = 'paused'", "status = 'active'"),
        ("review_status = 'to_review'", "review_status = 'approved'"),
        ("form = 'recurrin'", "form = 'recurring'"),
        ("timezone = 'Mars/Olympus'", "timezone = 'UTC'"),
    ],
)
def test_a_duty_refused_under_new_rules_then_left_and_back_is_dispatched_and_its_fault_ends(
    conn: Conn, invoke: Invoke, leave: str, back: str
) -> None:
    insert_duties(conn, [duty(LOCKED), duty("d2")])
    invoke(clock_event(FIRST))
    conn.execute("DELETE FROM duly_task WHERE duty_id = %s", (LOCKED,))
    conn.execute("UPDATE duly_dispatch_run SET rules = %s", (OLD_RULES,))
    conn.execute(f"ALTER TABLE duly_task ADD CONSTRAINT no_d1 CHECK (duty_id <> '{LOCKED}')")
    invoke(clock_event(FIRST + DAY))
    conn.execute(f"UPDATE duly_duty SET {leave} WHERE id = %s", (LOCKED,))
    invoke(clock_event(FIRST + 2 * DAY))
    conn.execute(f"UPDATE duly_duty SET {back} WHERE id = %s", (LOCKED,))
    conn.execute("ALTER TABLE duly_task DROP CONSTRAINT no_d1")
    at = FIRST + 3 * DAY
    asked = _would_create(invoke, at)
    run = invoke(clock_event(at))

    assert set(task_keys(conn, LOCKED)) == asked
    assert run["faults"] == []
    assert conn.execute("SELECT count(*) FROM duly_dispatch_fault").fetchone() == (0,)

"""Explain: the planner's verdict per candidate period, held against what a real run creates."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest

from dispatch_fn.cli import main
from dispatch_fn.planning import RunRequest, Window
from dispatch_fn.run import dispatch, explain
from support import NOW, Invoke, duty, insert_duties, task_keys

DUTIES = [
    duty("monthly", lead_days=14),
    duty("weekly-late", frequency="weekly", due_anchor="period_end", lead_days=10),
    duty("daily-window", frequency="daily", lead_days=3, effective_to=date(2026, 8, 22)),
    duty("after", due_anchor="after_period_end", due_offset_days=15, grace_days=5),
    duty("rolled", due_roll="following", holiday_calendar="US", lead_days=40),
    duty("paused", status="paused"),
    duty("gated", review_status="to_review"),
    duty("mars", timezone="Mars/Olympus"),
    duty("future", effective_from=date(2030, 1, 1)),
]


def _tasks(conn: psycopg.Connection[Any]) -> set[tuple[str, str]]:
    return {(str(d), str(k)) for d, k in conn.execute("SELECT duty_id, period_key FROM duly_task")}


@pytest.mark.parametrize("window", [None, Window(date(2026, 5, 1), date(2026, 8, 20))])
def test_explain_verdicts_are_what_a_real_run_then_does(
    conn: psycopg.Connection[Any], window: Window | None
) -> None:
    insert_duties(conn, DUTIES)
    # Some tasks already there: an earlier scheduled run, a week before.
    dispatch([conn], RunRequest(now=datetime(2026, 8, 14, 1, tzinfo=UTC)))
    before = _tasks(conn)
    explained = explain(conn, [d["id"] for d in DUTIES], NOW, window)
    dispatch([conn], RunRequest(now=NOW, window=window))
    created = _tasks(conn) - before

    def having(verdict: str) -> set[tuple[str, str]]:
        return {
            (duty_id, c["period_key"])
            for duty_id, e in explained.items()
            for c in e["candidates"]
            if c["verdict"] == verdict
        }

    assert having("would_create") == created
    assert having("exists") <= before
    assert not having("not_owed") & _tasks(conn)
    assert created  # the clock is chosen so that the run does create something


def test_explain_names_each_kind_of_verdict_and_skip(conn: psycopg.Connection[Any]) -> None:
    insert_duties(conn, DUTIES)
    dispatch([conn], RunRequest(now=NOW))
    explained = explain(conn, [d["id"] for d in DUTIES] + ["nobody"], NOW)
    assert explained["nobody"] == {"duty_id": "nobody", "found": False}
    assert explained["paused"]["skip"] == {"reason": "not_active", "detail": "", "fault": False}
    assert explained["gated"]["skip"]["reason"] == "not_approved"
    assert explained["mars"]["skip"]["fault"] is True
    assert "Mars/Olympus" in explained["mars"]["skip"]["detail"]
    assert explained["future"]["skip"]["reason"] == "outside_effective_window"
    weekly = {c["period_key"]: c for c in explained["weekly-late"]["candidates"]}
    assert weekly["2026-W34"]["verdict"] == "exists"
    assert isinstance(weekly["2026-W34"]["task_id"], int)
    assert weekly["2026-W35"] == {
        "period_key": "2026-W35",
        "start": "2026-08-24T00:00:00+00:00",
        "end": "2026-08-31T00:00:00+00:00",
        "due_date": "2026-08-30",
        "visible_from": "2026-08-20",
        "late_after": "2026-08-30",
        "verdict": "exists",
        "task_id": weekly["2026-W35"]["task_id"],
        "created_at": weekly["2026-W35"]["created_at"],
    }
    daily = {c["period_key"]: c for c in explained["daily-window"]["candidates"]}
    assert daily["2026-08-23"]["verdict"] == "not_owed"
    assert daily["2026-08-23"]["reason"] == "outside_effective_window"
    after = explained["after"]["candidates"][0]
    assert (after["due_date"], after["late_after"]) == ("2026-09-15", "2026-09-20")


def test_a_dry_run_naming_duties_explains_each_in_its_report(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    insert_duties(conn, DUTIES)
    report = invoke(
        {"now": "2026-08-21T01:00:00Z", "dry_run": True, "duty_ids": ["monthly", "gated", "x"]}
    )
    assert set(report["explain"]) == {"monthly", "gated", "x"}
    assert report["explain"]["monthly"]["candidates"][0]["verdict"] == "would_create"
    assert report["explain"]["x"]["found"] is False
    assert json.loads(json.dumps(report)) == report


def test_a_run_that_writes_or_names_no_duties_carries_no_explain(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    insert_duties(conn, DUTIES)
    assert "explain" not in invoke({"now": "2026-08-21T01:00:00Z", "duty_ids": ["monthly"]})
    assert "explain" not in invoke({"now": "2026-08-21T01:00:00Z", "dry_run": True})


def test_the_explain_command_prints_a_table_and_fails_for_an_unknown_duty(
    conn: psycopg.Connection[Any],
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    insert_duties(conn, DUTIES)
    assert main(["explain", "weekly-late", "--now", "2026-08-21T01:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "2026-W34" in out
    assert "would create" in out
    assert "not owed: not_visible_yet" in out
    assert main(["explain", "weekly-late", "--from", "2026-08-01", "--to", "2026-08-10",
                 "--json"]) == 0  # fmt: skip
    keys = [c["period_key"] for c in json.loads(capsys.readouterr().out)["candidates"]]
    assert keys == ["2026-W31", "2026-W32", "2026-W33"]
    assert main(["explain", "nobody"]) != 0
    assert "unknown" in capsys.readouterr().out
    assert main(["explain", "weekly-late", "--to", "2026-08-10"]) != 0
    assert "to" in capsys.readouterr().err


def test_the_explain_command_judges_with_the_deployment_s_horizon_as_its_runs_do(
    conn: psycopg.Connection[Any],
    db_url: str,
    invoke: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A horizon of one day; a daily duty reassigned during a three-day outage.
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("DISPATCH_CATCH_UP_DAYS", "1")
    insert_duties(conn, [duty("d1", frequency="daily", lead_days=0)])
    invoke({"now": "2026-11-20T01:00:00Z"}, catch_up_days=1)
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = 'd1'")
    assert main(["explain", "d1", "--now", "2026-11-24T01:00:00Z", "--json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    verdicts = {c["period_key"]: c.get("reason", c["verdict"]) for c in explained["candidates"]}

    assert verdicts == {
        "2026-11-22": "beyond_horizon",
        "2026-11-23": "would_create",
        "2026-11-24": "would_create",
    }


# The function's MemorySize is 256 MB; explaining must leave the run most of it.
EXPLAIN_PEAK_LIMIT = 64 * 2**20


def test_a_dry_run_explaining_100_daily_duties_over_5_years_stays_within_its_memory(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    ids = [f"daily-{n:03}" for n in range(100)]
    insert_duties(conn, [duty(i, frequency="daily", lead_days=0) for i in ids])
    event = {"from": "2021-08-22", "to": "2026-08-21", "dry_run": True, "duty_ids": ids}
    tracemalloc.start()
    try:
        report = invoke(event)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < EXPLAIN_PEAK_LIMIT, f"{peak / 2**20:.1f} MiB"
    # The budget's semantics: whole duties, in the order named, then a count of the rest.
    kept = list(report["explain"])
    assert kept == ids[: len(kept)]
    assert 1 <= len(kept) < 100
    assert all(len(report["explain"][i]["candidates"]) == 1826 for i in kept)
    assert report["explain_omitted"] == 100 - len(kept)
    assert str(report["explain_omitted"]) in report["explain_hint"]
    assert len(json.dumps(report["explain"])) <= 1_000_000


def _next_owed(conn: psycopg.Connection[Any], duty_id: str, at: datetime) -> Any:
    return explain(conn, [duty_id], at)[duty_id]["account"]["next_owed"]


def _created_by(invoke: Invoke, at: datetime) -> int:
    return int(invoke({"now": at.isoformat()})["tasks_created"])


@pytest.mark.parametrize(
    ("fields", "dispatched", "explained", "later"),
    [
        # Monthly, lead 7, window to 08-31: September, due 09-01, is never
        # owed. Before: next_owed 2026-08-25, the day its lead reaches it.
        ({"lead_days": 7, "effective_to": date(2026, 8, 31)},
         "2026-08-21", "2026-08-21", ("2026-08-25", "2026-09-01")),
        # Weekly, lead 2, its window closed behind its account. Before: 2026-11-07.
        ({"frequency": "weekly", "lead_days": 2, "effective_to": date(2026, 11, 4)},
         "2026-11-02", "2026-11-06", ("2026-11-07", "2026-11-09")),
    ],
    ids=["window ends before the next period", "window closed behind the account"],
)  # fmt: skip
def test_next_owed_is_none_once_no_period_can_be_owed_in_the_window(  # noqa: PLR0917 - the scenario's parts, by name
    conn: psycopg.Connection[Any],
    invoke: Invoke,
    fields: dict[str, Any],
    dispatched: str,
    explained: str,
    later: tuple[str, ...],
) -> None:
    insert_duties(conn, [duty("d", **fields)])
    invoke({"now": f"{dispatched}T01:00:00Z"})
    at = datetime.fromisoformat(f"{explained}T01:00:00+00:00")

    assert _next_owed(conn, "d", at) is None
    for day in later:
        assert _created_by(invoke, datetime.fromisoformat(f"{day}T01:00:00+00:00")) == 0


def test_next_owed_of_a_duty_whose_window_opens_later_is_its_first_period_in_the_window(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    # Monthly, due on the 1st: October's due date lies before the window
    # opens on 10-15, so November is the first period it owes.
    insert_duties(conn, [duty("m", lead_days=0, effective_from=date(2026, 10, 15))])
    at = datetime(2026, 9, 20, 1, tzinfo=UTC)
    invoke({"now": at.isoformat()})

    # Before: "2026-10-01", a period outside the window.
    assert _next_owed(conn, "m", at) == "2026-11-01"
    assert _created_by(invoke, datetime(2026, 10, 15, 1, tzinfo=UTC)) == 0
    assert _created_by(invoke, datetime(2026, 10, 31, 1, tzinfo=UTC)) == 0
    assert _created_by(invoke, datetime(2026, 11, 1, 1, tzinfo=UTC)) == 1


@pytest.mark.parametrize(
    ("lead", "edit", "explained"),
    [
        # The runs of 11-01 to 11-07 kept the account through 11-07: a run at
        # 11-04 owes nothing, and the run of 11-08 creates 11-08 first.
        # Before: 2026-11-05, a day the account counts dispatched.
        (0, None, "2026-11-08"),
        # Lead 3: the run of 11-07 created up to 11-10; 11-11 becomes owed on
        # 11-08. Before: 2026-11-05, the day 11-08 (a task since 11-07) became owed.
        (3, None, "2026-11-08"),
        # Lead raised to 3 after the run of 11-07: the periods it opens are
        # owed as of the change's day, 11-07. Before: 2026-11-05.
        (0, "UPDATE duly_duty SET lead_days = 3 WHERE id = 'd'", "2026-11-07"),
    ],
    ids=["lead 0", "lead 3", "lead raised after the account's day"],
)
def test_next_owed_at_a_clock_before_the_account_s_day_is_a_day_the_account_still_owes(
    conn: psycopg.Connection[Any], invoke: Invoke, lead: int, edit: str | None, explained: str
) -> None:
    insert_duties(conn, [duty("d", frequency="daily", lead_days=lead)])
    for day in range(1, 8):
        invoke({"now": f"2026-11-0{day}T01:00:00Z"})
    if edit is not None:
        conn.execute(edit)
    at = datetime(2026, 11, 4, 1, tzinfo=UTC)

    assert _next_owed(conn, "d", at) == explained
    # The runs agree: the one at the explained clock and the one the day
    # before next_owed create nothing, the one on next_owed creates.
    owed = datetime.fromisoformat(f"{explained}T01:00:00+00:00")
    assert _created_by(invoke, at) == 0
    assert _created_by(invoke, owed - timedelta(days=1)) == 0
    assert _created_by(invoke, owed) >= 1


@pytest.mark.parametrize("frequency", ["monthly", "quarterly"])
def test_next_owed_at_a_clock_before_a_change_s_day_is_the_change_s_day(
    conn: psycopg.Connection[Any], invoke: Invoke, frequency: str
) -> None:
    # The account is kept on 11-20 and the run of 11-21 passes the duty over;
    # the owner changes after it (dispatch_changed_on 2026-11-21). The next
    # run owes the new owner the current period as of that day.
    insert_duties(conn, [duty("d", frequency=frequency, lead_days=0)])
    for day in (20, 21):
        invoke({"now": f"2026-11-{day}T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = 'd'")

    # Before: 2026-12-01 (quarterly: 2027-01-01), the next period's day.
    assert _next_owed(conn, "d", datetime(2026, 11, 20, 1, tzinfo=UTC)) == "2026-11-21"
    assert _created_by(invoke, datetime(2026, 11, 22, 1, tzinfo=UTC)) == 1


def _at(text: str) -> datetime:
    return datetime.fromisoformat(f"{text}T01:00:00+00:00")


@pytest.mark.parametrize(
    ("effective_to", "fixed_after"),
    [
        # Open window; faulted on 11-08 and 11-09, fixed after the run of 11-09.
        (None, "2026-11-09"),
        # Window ends 11-09; faulted on 11-08 to 11-10, fixed after the run of
        # 11-10 (a change after the window's last day): the window closed
        # behind the account, so 11-08 and 11-09 are still owed.
        (date(2026, 11, 9), "2026-11-10"),
    ],
    ids=["open_window", "window_closed_behind"],
)
def test_next_owed_before_the_account_s_day_names_the_account_s_own_owed_day_before_a_change(
    conn: psycopg.Connection[Any], invoke: Invoke, effective_to: date | None, fixed_after: str
) -> None:
    insert_duties(conn, [duty("d", frequency="daily", lead_days=0, effective_to=effective_to)])
    for n in range(1, 8):
        invoke({"now": f"2026-11-0{n}T01:00:00Z"})
    # Broken after the run of 11-07 (the account's day): the runs fault it
    # and leave its account on 11-07.
    conn.execute("UPDATE duly_duty SET due_offset_months = 5 WHERE id = 'd'")
    faulted = date(2026, 11, 8)
    while faulted.isoformat() <= fixed_after:
        report = invoke({"now": f"{faulted.isoformat()}T01:00:00Z"})
        assert report["fault_counts"].get("invalid_cadence") == 1
        faulted = date.fromordinal(faulted.toordinal() + 1)
    # Mended: a cadence change, marked on the latest scheduled clock's day;
    # after the window's last day, the break's mark (11-07) stays (0024).
    conn.execute("UPDATE duly_duty SET due_offset_months = 0 WHERE id = 'd'")
    account = conn.execute(
        "SELECT dispatch_through, dispatch_changed_on FROM duly_duty WHERE id = 'd'"
    ).fetchone()
    assert account is not None
    marked = fixed_after if effective_to is None else "2026-11-07"
    assert (account[0].isoformat(), account[1].isoformat()) == ("2026-11-07", marked)

    explained = _next_owed(conn, "d", _at("2026-11-04"))

    # What the runs do: a run at 11-04 creates nothing; the next scheduled run
    # creates 11-08 (and on): the account owes every day after 11-07.
    assert invoke({"now": "2026-11-04T01:00:00Z"})["tasks_created"] == 0
    after = date.fromordinal(date.fromisoformat(fixed_after).toordinal() + 1).isoformat()
    invoke({"now": f"{after}T01:00:00Z"})
    created = [key for key in task_keys(conn, "d") if key > "2026-11-07"]
    assert created[0] == "2026-11-08"
    # Before: the change's day (open window: 2026-11-09) or null (a change
    # after the window's end). With the window closed behind, the break's
    # mark, on the account's day, stays: a run at that day's clock owes the
    # change its current period again.
    assert explained == ("2026-11-08" if effective_to is None else "2026-11-07")


def test_next_owed_before_the_account_s_day_misses_a_period_a_widened_lead_opens_earlier(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    # Weekly, lead 2: the run of 11-07 created 2026-W46 and kept the account
    # through 11-07; W47 becomes owed 11-14, so the runs of 11-08 to 11-12
    # pass it over. After the run of 11-12 its lead becomes 7: W47 (from
    # 11-16) now becomes owed 11-09, after the account's day.
    insert_duties(conn, [duty("d", frequency="weekly", lead_days=2)])
    for n in range(1, 13):
        invoke({"now": f"2026-11-{n:02}T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET lead_days = 7 WHERE id = 'd'")

    explained = _next_owed(conn, "d", _at("2026-11-05"))

    assert _created_by(invoke, _at("2026-11-05")) == 0
    assert _created_by(invoke, _at("2026-11-08")) == 0
    assert _created_by(invoke, _at("2026-11-09")) == 1  # 2026-W47
    # It comes before the change's day. Before: 2026-11-12.
    assert explained == "2026-11-09"


def _verdicts(conn: psycopg.Connection[Any], duty_id: str, at: datetime) -> dict[str, str]:
    candidates = explain(conn, [duty_id], at)[duty_id]["candidates"]
    return {c["period_key"]: c.get("reason", c["verdict"]) for c in candidates}


def test_next_owed_before_the_account_s_day_passes_over_the_days_a_pause_held(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    # Daily, lead 0: kept through 11-07 and paused then; the runs of 11-08
    # to 11-10 pass it over; resumed after 11-10 (the resume's day).
    insert_duties(conn, [duty("d", frequency="daily", lead_days=0)])
    for n in range(1, 8):
        invoke({"now": f"2026-11-0{n}T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id = 'd'")
    for n in (8, 9, 10):
        invoke({"now": f"2026-11-{n:02}T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd'")

    explained = _next_owed(conn, "d", _at("2026-11-04"))

    assert _verdicts(conn, "d", _at("2026-11-08")) == {"2026-11-08": "not_dispatchable"}
    assert _created_by(invoke, _at("2026-11-08")) == 0
    # Before: 2026-11-08, a day the pause held: the resume's own day comes first.
    assert explained == "2026-11-10"


def test_next_owed_at_the_account_s_day_passes_over_the_days_a_window_edit_left_out(
    conn: psycopg.Connection[Any], invoke: Invoke
) -> None:
    # Daily, lead 0: after the run of 09-02 its window opens on 09-05; the
    # runs of 09-03 and 09-04; then the window is opened again (on 09-04).
    insert_duties(conn, [duty("d", frequency="daily", lead_days=0)])
    for day in ("2026-09-01", "2026-09-02"):
        invoke({"now": f"{day}T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET effective_from = '2026-09-05' WHERE id = 'd'")
    for day in ("2026-09-03", "2026-09-04"):
        invoke({"now": f"{day}T01:00:00Z"})
    conn.execute("UPDATE duly_duty SET effective_from = NULL WHERE id = 'd'")

    explained = _next_owed(conn, "d", _at("2026-09-02"))

    assert _verdicts(conn, "d", _at("2026-09-03")) == {"2026-09-03": "not_dispatchable"}
    assert _created_by(invoke, _at("2026-09-03")) == 0
    assert _created_by(invoke, _at("2026-09-05")) == 1
    # Before: 2026-09-03, a day the window did not hold.
    assert explained == "2026-09-04"

"""``python -m dispatch_fn demo``: a small organisation, dispatched four times.

Seeds ``org-demo`` (replacing the demo's own earlier duties and their tasks),
then runs the handler as the schedule would (at 01:00 UTC today, unless given
another clock), the same run again, and a 13-month backfill twice, printing
what each run did per zone and frequency, and which period Shanghai's and Los
Angeles's duties got on the same UTC run.

The demo may run on a database that holds real work (``DATABASE_URL``), so it
keeps to its own rows: it deletes only the duties it seeds (by id) and their
tasks, says which other duties ``org-demo`` holds and keeps them, and scopes
every run to ``org-demo``, so no other organisation is dispatched. One duty
is seeded broken on purpose, to show a fault; the demo says so where it
shows, and pauses it once shown, so the unscoped runs a newcomer makes next
are not degraded by it.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

import psycopg

from dispatch_fn.aws import handle, logger, runtime_for
from dispatch_fn.cli import exit_status
from dispatch_fn.cli.exit_status import ExitStatus
from dispatch_fn.cli.summary import report_lines, table_lines
from dispatch_fn.db import ConnectionCache, demo_data, open_url
from dispatch_fn.engine import period_key_for
from dispatch_fn.settings import Settings

ORGANIZATION = "org-demo"
# The duty the demo seeds broken on purpose, to show a fault: its runs are
# degraded by that one duty, and by no other. The demo pauses it once shown.
_SEEDED_FAULTS: Final = frozenset({"duty-broken-zone"})
# How many of the organisation's other duties the demo names when it keeps them.
_OTHERS_SHOWN: Final = 5

# Each duty: id, name, form, status, frequency, zone, anchor, offset, lead, effective window.
_DUTIES: list[tuple[Any, ...]] = [
    ("duty-sh-monthly", "File the emissions return", "recurring", "active", "monthly",
     "Asia/Shanghai", "period_start", 4, 7, None, None),
    ("duty-sh-daily", "Check the kiln log", "recurring", "active", "daily",
     "Asia/Shanghai", "period_start", 0, 0, None, None),
    ("duty-la-weekly", "Reconcile the petty cash", "recurring", "active", "weekly",
     "America/Los_Angeles", "period_end", 0, 2, None, None),
    ("duty-la-quarterly", "Quarterly safety walk", "recurring", "active", "quarterly",
     "America/Los_Angeles", "period_end", -14, 21, None, None),
    ("duty-berlin-monthly", "Submit the VAT pre-return", "recurring", "active", "monthly",
     "Europe/Berlin", "period_end", 10, 10, None, None),
    ("duty-berlin-semiannual", "Works council report", "recurring", "active", "semiannual",
     "Europe/Berlin", "period_start", 30, 14, None, None),
    ("duty-santiago-daily", "Open the site diary", "recurring", "active", "daily",
     "America/Santiago", "period_start", 0, 0, None, None),
    ("duty-santiago-fortnightly", "Payroll cut-off", "recurring", "active", "fortnightly",
     "America/Santiago", "period_end", -2, 3, None, None),
    ("duty-auckland-fortnightly", "Review the hazard register", "recurring", "active",
     "fortnightly", "Pacific/Auckland", "period_start", 3, 5, None, None),
    ("duty-auckland-monthly", "Board pack", "recurring", "active", "monthly",
     "Pacific/Auckland", "period_end", -5, 7, date(2025, 3, 1), None),
    ("duty-utc-annual", "Renew the operating licence", "recurring", "active", "annual",
     "UTC", "period_start", 90, 30, None, None),
    ("duty-utc-weekly", "Rotate the on-call pager", "recurring", "active", "weekly",
     "UTC", "period_start", 0, 1, None, date(2026, 6, 30)),
    ("duty-utc-future", "New regulator's monthly return", "recurring", "active", "monthly",
     "UTC", "period_start", 14, 7, date(2030, 1, 1), None),
    ("duty-standing-policy", "Keep the fire policy current", "standing", "active", None,
     "UTC", "period_start", 0, 7, None, None),
    ("duty-one-off-audit", "Respond to the 2026 audit", "one_off", "active", None,
     "Europe/Berlin", "period_start", 0, 7, None, None),
    ("duty-paused-weekly", "Weekly stand-up notes", "recurring", "paused", "weekly",
     "Europe/Berlin", "period_start", 0, 1, None, None),
    ("duty-retired-monthly", "Fax the monthly figures", "recurring", "retired", "monthly",
     "UTC", "period_start", 0, 7, None, None),
    ("duty-broken-zone", "Inspect the rover", "recurring", "active", "monthly",
     "Mars/Olympus", "period_start", 0, 7, None, None),
]  # fmt: skip

# The shapes compliance teams write (docs/contract.md#due-dates): due after the period ends, on a
# business day of a holiday calendar, with grace; and two definitions the
# review gate holds back.
_COMPLIANCE_DUTIES: list[dict[str, Any]] = [
    {"id": "duty-gb-vat-quarterly", "name": "Q VAT return (20 days after, next business day)",
     "frequency": "quarterly", "timezone": "Europe/London", "due_anchor": "after_period_end",
     "due_offset_days": 20, "due_roll": "following", "holiday_calendar": "GB-SCT",
     "grace_days": 0, "lead_days": 14},
    {"id": "duty-us-payroll-monthly", "name": "Payroll tax (15th of the next month)",
     "frequency": "monthly", "timezone": "America/New_York", "due_anchor": "after_period_end",
     "due_offset_days": 15, "due_roll": "modified_following", "holiday_calendar": "US",
     "grace_days": 3, "lead_days": 10},
    {"id": "duty-de-annual-report", "name": "Annual report (last day of the 4th month after)",
     "frequency": "annual", "timezone": "Europe/Berlin", "due_anchor": "after_period_end",
     "due_offset_months": 4, "due_roll": "preceding", "holiday_calendar": "DE-BY",
     "grace_days": 30, "lead_days": 60},
    {"id": "duty-sa-weekly-rolled", "name": "Weekly site return (Friday/Saturday weekend)",
     "frequency": "weekly", "timezone": "Asia/Riyadh", "due_anchor": "period_end",
     "due_roll": "preceding", "holiday_calendar": "SA", "lead_days": 2},
    {"id": "duty-to-review", "name": "New emissions return, awaiting review",
     "frequency": "monthly", "timezone": "Asia/Shanghai", "review_status": "to_review"},
    {"id": "duty-returned", "name": "Returned for corrections", "frequency": "monthly",
     "timezone": "UTC", "review_status": "returned"},
]  # fmt: skip


def seeded_ids() -> list[str]:
    """The ids of the duties the demo seeds: the only duties it deletes."""
    return [row[0] for row in _DUTIES] + [fields["id"] for fields in _COMPLIANCE_DUTIES]


# The columns demo_data.seed writes that a duty above may leave out: their column defaults.
_UNSET: Final[dict[str, Any]] = {
    "business_unit_id": None, "due_anchor": "period_start", "due_offset_days": 0,
    "due_offset_months": 0, "due_roll": "none", "holiday_calendar": None, "lead_days": 7,
    "grace_days": 0, "effective_from": None, "effective_to": None, "review_status": "approved",
}  # fmt: skip


def _seed_rows() -> list[dict[str, Any]]:
    """Every duty the demo seeds, with every column ``demo_data.seed`` writes."""
    plain = [
        {"id": d[0], "name": d[1], "form": d[2], "status": d[3], "owner_id": f"owner-{n % 4}",
         "business_unit_id": f"bu-{n % 2}", "source": "catalog" if n % 3 else "assigned",
         "frequency": d[4], "timezone": d[5], "due_anchor": d[6], "due_offset_days": d[7],
         "lead_days": d[8], "effective_from": d[9], "effective_to": d[10]}
        for n, d in enumerate(_DUTIES)
    ]  # fmt: skip
    compliance = [
        {"form": "recurring", "status": "active", "owner_id": f"owner-{n % 4}",
         "source": "catalog", **fields}
        for n, fields in enumerate(_COMPLIANCE_DUTIES)
    ]  # fmt: skip
    return [{**_UNSET, "organization_id": ORGANIZATION, **row} for row in [*plain, *compliance]]


def seed(conn: psycopg.Connection[Any]) -> list[str]:
    """Replace the demo's own duties and their tasks with the fresh seed.

    Returns the ids of the other duties ``org-demo`` holds, which are kept.
    """
    return demo_data.seed(conn, ORGANIZATION, _seed_rows())


def _tasks_by_group(conn: psycopg.Connection[Any]) -> Counter[tuple[str, str]]:
    return demo_data.tasks_by_group(conn, ORGANIZATION)


def _print_run(title: str, report: dict[str, Any], created: Counter[tuple[str, str]]) -> None:
    print()
    print("\n".join(_on_purpose(line) for line in report_lines(title, report)))
    rows = [(zone, frequency, n) for (zone, frequency), n in sorted(created.items())]
    if rows:
        print("\n".join(table_lines(("zone", "frequency", "created"), rows)))
    else:
        print("   (no new tasks: every owed task already existed)")


def _on_purpose(line: str) -> str:
    """A report line, saying so when it shows the fault the demo seeds on purpose."""
    seeded = any(line.lstrip().startswith(f"fault: {duty_id} ") for duty_id in _SEEDED_FAULTS)
    return f"{line}  <- seeded broken on purpose, to show a fault" if seeded else line


def _pause_seeded_faults(conn: psycopg.Connection[Any]) -> None:
    """Pause the duty seeded broken, once the demo has shown its fault.

    The runs a newcomer makes next (the README's backfill, its dry run, the
    schedule's payloads) are unscoped, so an active broken duty would degrade
    every one of them (exit 7) for a fault that only the demo wanted.
    """
    demo_data.pause(conn, ORGANIZATION, sorted(_SEEDED_FAULTS))
    for duty_id in sorted(_SEEDED_FAULTS):
        print(
            f"\n{duty_id} is now paused, so the runs you make next are not degraded by it;"
            f" `UPDATE duly_duty SET status = 'active' WHERE id = '{duty_id}'` brings the fault"
            " back, and `explain` then exits 12 for it."
        )


# The user's own acceptance point: one UTC run, each duty in its own local period.
_SAME_RUN_DUTIES: Final = (
    "duty-sh-daily",
    "duty-sh-monthly",
    "duty-la-weekly",
    "duty-la-quarterly",
)
_OTHER_CITY: Final = {
    "Asia/Shanghai": "America/Los_Angeles",
    "America/Los_Angeles": "Asia/Shanghai",
}


def _print_same_run(conn: psycopg.Connection[Any], clock: datetime) -> None:
    """For the Shanghai and Los Angeles duties: local time, and the period each got at ``clock``."""
    rows = []
    for duty_id in _SAME_RUN_DUTIES:
        found = demo_data.duty_periods(conn, duty_id)
        if found is None:
            continue
        frequency, zone, keys = found.frequency, found.timezone, found.period_keys
        local = clock.astimezone(ZoneInfo(zone)).strftime("%a %Y-%m-%d %H:%M")
        other = _OTHER_CITY[zone]
        rows.append((duty_id, zone, local, frequency, period_key_for(frequency, clock, zone),
                     f"{period_key_for(frequency, clock, other)} in {other}", keys))  # fmt: skip
    print(f"\n## Shanghai and Los Angeles on the same UTC run (clock {clock.isoformat()})")
    headers = ("duty", "zone", "local time", "frequency", "period", "the same clock", "tasks")
    print("\n".join(table_lines(headers, rows)))


def run_demo(dsn: str, now: datetime | None = None) -> list[dict[str, Any]]:
    """Seed, run the four demo dispatches against ``dsn``, print and return their reports."""
    # The schedule's own time today: Shanghai is on today, Los Angeles still on yesterday.
    clock = (now or datetime.now(UTC).replace(hour=1, minute=0, second=0)).replace(microsecond=0)
    this_month = clock.date().replace(day=1)
    backfill_to = this_month - timedelta(days=1)
    backfill_from = date(backfill_to.year - 1, backfill_to.month, 1)  # 13 whole months
    # Scoped to the demo's organisation: an unscoped run would dispatch (and
    # catch up) every organisation in the database.
    scheduled = {"now": clock.isoformat(), "organization_id": ORGANIZATION}
    backfill = {"from": backfill_from.isoformat(), "to": backfill_to.isoformat(),
                "now": clock.isoformat(), "organization_id": ORGANIZATION}  # fmt: skip
    runs = [
        ("1. scheduled run", scheduled),
        ("2. the same run again", scheduled),
        ("3. 13-month backfill", backfill),
        ("4. the same backfill again", backfill),
    ]
    reports: list[dict[str, Any]] = []
    connections = ConnectionCache()
    settings = Settings(database_url=dsn)
    # The demo prints its own account of each run; the handler's INFO lines
    # would interleave with it.
    # (restored after: the process may go on to invoke the handler itself).
    level = logger.log_level
    logger.setLevel(logging.WARNING)
    try:
        with open_url(dsn, autocommit=True) as conn:
            others = seed(conn)
            print(
                f"Seeded {ORGANIZATION}: {len(_DUTIES) + len(_COMPLIANCE_DUTIES)} duties in"
                " 9 zones, every frequency, form, due anchor and roll."
            )
            if others:
                print(_kept_note(others))
            for title, event in runs:
                before = _tasks_by_group(conn)
                runtime = runtime_for(None, settings, connections, clock=lambda: clock)
                report = handle(event, None, runtime)
                created = _tasks_by_group(conn) - before
                _print_run(title, report, created)
                if not reports:
                    _print_same_run(conn, clock)
                reports.append(report)
            _print_compliance(conn)
            _pause_seeded_faults(conn)
            total = demo_data.task_count(conn, ORGANIZATION)
            print(f"\n{ORGANIZATION} now holds {total} tasks.")
    finally:
        logger.setLevel(level)
        connections.discard()
    return reports


def _kept_note(others: list[str]) -> str:
    shown = ", ".join(others[:_OTHERS_SHOWN]) + (", ..." if len(others) > _OTHERS_SHOWN else "")
    duties = "duty" if len(others) == 1 else "duties"
    return (
        f"Note: {ORGANIZATION} also holds {len(others)} {duties} the demo did not seed ({shown});"
        " they and their tasks are kept, and the demo's runs dispatch them too."
    )


def exit_status_of(reports: list[dict[str, Any]]) -> tuple[ExitStatus, str | None]:
    """The demo's exit status: its runs' worst, the seeded fault aside."""
    for report in reports:
        faults = sum(report["fault_counts"].values())
        seeded = sum(1 for fault in report["faults"] if fault["duty_id"] in _SEEDED_FAULTS)
        judged = {**report, "degraded": False} if 0 < faults == seeded else report
        status, why = exit_status.of_report(judged)
        if status is not ExitStatus.OK:
            return status, why
    return ExitStatus.OK, None


def _print_compliance(conn: psycopg.Connection[Any]) -> None:
    """The latest task of each compliance-shaped duty: its period, due date and lateness."""
    rows = demo_data.latest_tasks(conn, ORGANIZATION, [d["id"] for d in _COMPLIANCE_DUTIES])
    print("\n## due after the period, rolled onto business days, with grace (latest task each)")
    print(f"   {'duty':<26}{'period':<10}{'due':<12}{'late after':<12}")
    for row in rows:
        print(
            f"   {row.duty_id:<26}{row.period_key:<10}{row.due_date.isoformat():<12}"
            f"{row.late_after.isoformat():<12}"
        )

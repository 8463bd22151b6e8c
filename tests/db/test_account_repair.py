"""Rows in flight when a migration replaced the account trigger (docs/adr/0012-duty-account.md).

Each test runs the account trigger as an earlier migration left it, applies
the later one as the migrator would (each statement alone), and goes on
through the handler: 0018's repairs of rows 0017 found, and the accounts
0021 finds on an old zone's days.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dispatch_fn.db.migrate import Migration, bundled_migrations, split_statements
from support import Conn, Invoke, clock_event, duty, insert_duties, set_aside, task_keys

DAY = timedelta(days=1)
FIRST = datetime(2026, 11, 20, 1, 0, tzinfo=UTC)
LOCKED = "d1"
REPAIRS = "0018_account_repairs"
ZONE_EDITS = "0021_zone_edits"
_FUNCTION = "CREATE OR REPLACE FUNCTION duly_duty_account_mark()"


def _migration(version: str) -> Migration:
    (found,) = [each for each in bundled_migrations() if each.version == version]
    return found


def _trigger_of(version: str) -> str:
    """The account trigger's function as migration ``version`` wrote it."""
    text = _migration(version).script
    start = text.index(_FUNCTION)
    return text[start : text.index("$$;", start) + 3]


def _apply_repairs(conn: Conn, version: str = REPAIRS) -> None:
    for statement in split_statements(_migration(version).script):
        conn.execute(statement)


def _status(conn: Conn, status: str) -> None:
    conn.execute("UPDATE duly_duty SET status = %s WHERE id = %s", (status, LOCKED))


def test_a_duty_resumed_under_0016_and_paused_again_after_the_repair_loses_nothing(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Under 0016: dispatched on the 20th, paused on that day, resumed after the
    # 21st's run (a pause that owed nothing opened no span then), set aside on
    # the 22nd. After 0018: set aside on the 23rd, paused, resumed after the 24th's.
    conn.execute(_trigger_of("0016_owed_spans_next_at"))
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    _status(conn, "paused")
    invoke(clock_event(FIRST + DAY))
    _status(conn, "active")
    set_aside(holder, invoke, FIRST + 2 * DAY, LOCKED)
    _apply_repairs(conn)
    set_aside(holder, invoke, FIRST + 3 * DAY, LOCKED)
    _status(conn, "paused")
    invoke(clock_event(FIRST + 4 * DAY))
    _status(conn, "active")
    invoke(clock_event(FIRST + 5 * DAY))

    # The 22nd and the 23rd became owed while it was dispatchable.
    assert task_keys(conn, LOCKED) == ["2026-11-20", "2026-11-22", "2026-11-23", "2026-11-25"]


def test_a_change_made_under_0016_is_still_counted_after_the_repair(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Under 0016: dispatched on the 20th, set aside on the 21st, made monthly.
    conn.execute(_trigger_of("0016_owed_spans_next_at"))
    insert_duties(conn, [duty(LOCKED, frequency="daily", lead_days=0), duty("d2")])
    invoke(clock_event(FIRST))
    set_aside(holder, invoke, FIRST + DAY, LOCKED)
    conn.execute("UPDATE duly_duty SET frequency = 'monthly' WHERE id = %s", (LOCKED,))
    _apply_repairs(conn)
    changed = invoke(clock_event(FIRST + 2 * DAY))

    assert changed["changed_while_owed"] == 1
    assert task_keys(conn, LOCKED) == ["2026-11", "2026-11-20"]


def test_the_repairs_leave_every_account_the_current_trigger_wrote_as_it_is(
    conn: Conn, holder: Conn, invoke: Invoke
) -> None:
    # Accounts in each state the trigger leaves: kept, paused on the account's
    # day and resumed (a span), changed after a set-aside (a recast day),
    # paused, added before any run and changed, and set aside.
    insert_duties(
        conn,
        [duty(f"d{n}", frequency="daily", lead_days=0) for n in range(1, 7)]
        + [duty("d7", frequency="weekly", status="paused")],
    )
    conn.execute("UPDATE duly_duty SET grace_days = 1 WHERE id = 'd6'")
    invoke(clock_event(FIRST))
    conn.execute("UPDATE duly_duty SET status = 'paused' WHERE id IN ('d2', 'd4')")
    invoke(clock_event(FIRST + DAY))
    conn.execute("UPDATE duly_duty SET status = 'active' WHERE id = 'd2'")
    set_aside(holder, invoke, FIRST + 2 * DAY, LOCKED)
    conn.execute("UPDATE duly_duty SET frequency = 'monthly' WHERE id IN ('d1', 'd3')")
    accounts = (
        "SELECT id, dispatch_through, dispatch_paused_on, dispatch_changed_on,"
        " dispatch_owed_between::text, dispatch_recast_on, dispatch_version"
        " FROM duly_duty ORDER BY id"
    )
    before = conn.execute(accounts).fetchall()
    _apply_repairs(conn)

    assert conn.execute(accounts).fetchall() == before


def test_a_duty_moved_behind_before_0021_and_reassigned_after_it_gives_the_new_owner_today(
    conn: Conn, invoke: Invoke
) -> None:
    # Moved under 0019's trigger from Kiritimati (+14) to Pago Pago (-11), the
    # account stayed on Kiritimati's day, ahead of Pago Pago's; the next edit,
    # whatever it is, moves it back.
    conn.execute(_trigger_of("0019_window_edits"))
    half_past_ten = datetime(2026, 11, 20, 10, 30, tzinfo=UTC)
    insert_duties(
        conn, [duty(LOCKED, frequency="daily", timezone="Pacific/Kiritimati", lead_days=0)]
    )
    invoke(clock_event(half_past_ten))
    conn.execute("UPDATE duly_duty SET timezone = 'Pacific/Pago_Pago' WHERE id = %s", (LOCKED,))
    _apply_repairs(conn, ZONE_EDITS)
    conn.execute("UPDATE duly_duty SET owner_id = 'owner-2' WHERE id = %s", (LOCKED,))
    for hours in (22, 23, 24, 25, 26, 49):
        invoke(clock_event(half_past_ten + timedelta(hours=hours)), schedule_interval_hours=1)
    rows = conn.execute(
        "SELECT period_key FROM duly_task WHERE owner_id = 'owner-2' ORDER BY 1"
    ).fetchall()

    # 08:30 on the 21st is the 20th in Pago Pago: owner-2's current period.
    assert [str(key) for (key,) in rows] == ["2026-11-20", "2026-11-21", "2026-11-22"]

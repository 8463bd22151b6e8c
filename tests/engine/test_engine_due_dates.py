"""Due dates clamp into their period; visibility never clamps."""

from __future__ import annotations

from datetime import date

import pytest

from dispatch_fn.engine import due_date_for, visible_from_for


@pytest.mark.parametrize(
    ("key", "anchor", "offset", "due"),
    [
        ("2026-08", "period_start", 0, date(2026, 8, 1)),
        ("2026-08", "period_start", 4, date(2026, 8, 5)),
        ("2026-08", "period_end", 0, date(2026, 8, 31)),
        ("2026-08", "period_end", -3, date(2026, 8, 28)),
        ("2026-02", "period_start", 30, date(2026, 2, 28)),
        ("2024-02", "period_start", 30, date(2024, 2, 29)),
        ("2026-02", "period_start", 27, date(2026, 2, 28)),
        ("2026-03", "period_end", -90, date(2026, 3, 1)),
        ("2026-08", "period_start", -1, date(2026, 8, 1)),
        ("2026-08", "period_end", 1, date(2026, 8, 31)),
        ("2026-08", "period_start", 10**30, date(2026, 8, 31)),
        ("2026-08", "period_end", -(10**30), date(2026, 8, 1)),
    ],
)
def test_monthly_due_dates_clamp_into_the_month(
    key: str, anchor: str, offset: int, due: date
) -> None:
    assert due_date_for("monthly", key, "Asia/Shanghai", anchor, offset) == due


@pytest.mark.parametrize(
    ("frequency", "key", "anchor", "offset", "due"),
    [
        ("daily", "2026-08-21", "period_start", 5, date(2026, 8, 21)),
        ("weekly", "2026-W34", "period_start", 4, date(2026, 8, 21)),
        ("weekly", "2026-W34", "period_end", 0, date(2026, 8, 23)),
        ("fortnightly", "2026-W33", "period_start", 13, date(2026, 8, 23)),
        ("fortnightly", "2026-W53", "period_start", 13, date(2027, 1, 3)),
        ("quarterly", "2026-Q3", "period_end", -30, date(2026, 8, 31)),
        ("semiannual", "2026-H1", "period_start", 45, date(2026, 2, 15)),
        ("annual", "2026", "period_end", 0, date(2026, 12, 31)),
        ("annual", "2026", "period_start", 400, date(2026, 12, 31)),
    ],
)
def test_due_dates_for_every_frequency(
    frequency: str, key: str, anchor: str, offset: int, due: date
) -> None:
    assert due_date_for(frequency, key, "Europe/Berlin", anchor, offset) == due


def test_due_date_is_the_same_calendar_date_in_every_zone() -> None:
    dues = {
        due_date_for("monthly", "2026-08", tz, "period_start", 4)
        for tz in ("Pacific/Kiritimati", "UTC", "Pacific/Pago_Pago", "Asia/Kathmandu")
    }
    assert dues == {date(2026, 8, 5)}


@pytest.mark.parametrize(
    ("due", "lead", "visible"),
    [
        (date(2026, 8, 3), 7, date(2026, 7, 27)),  # appears in the previous month
        (date(2026, 3, 3), 7, date(2026, 2, 24)),
        (date(2026, 8, 21), 0, date(2026, 8, 21)),
        (date(2026, 8, 21), -2, date(2026, 8, 23)),  # negative lead: after the due date
        (date(2026, 1, 1), 400, date(2024, 11, 27)),
    ],
)
def test_visible_from_is_due_minus_lead_and_never_clamped(
    due: date, lead: int, visible: date
) -> None:
    assert visible_from_for(due, lead) == visible

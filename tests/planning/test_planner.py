"""The pure planner: selection, candidates, gates, copied fields, faults.

See docs/contract.md#one-run.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from dispatch_fn.planning import Plan, Window, plan_dispatch
from support import NOW, TASK_COLUMNS, duty


def keys(plan: Plan, duty_id: str | None = None) -> list[str]:
    return [d["period_key"] for d in plan.drafts if duty_id is None or d["duty_id"] == duty_id]


def reasons(plan: Plan) -> dict[str, str]:
    return {skip.duty_id: skip.reason for skip in plan.skipped}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"form": "standing", "frequency": None}, "standing"),
        ({"form": "standing", "status": "paused"}, "standing"),
        ({"form": "one_off"}, "one_off"),
        ({"status": "paused"}, "not_active"),
        ({"status": "retired"}, "not_active"),
        ({"status": None}, "not_active"),
    ],
)
def test_only_active_recurring_duties_are_dispatched(fields: dict[str, Any], reason: str) -> None:
    plan = plan_dispatch([duty("d1", **fields)], NOW)
    assert plan.drafts == []
    assert reasons(plan) == {"d1": reason}
    assert plan.faults == []


@pytest.mark.parametrize(
    ("fields", "reason", "named"),
    [
        ({"form": "periodic"}, "unknown_form", "periodic"),
        ({"form": None}, "unknown_form", "None"),
        ({"frequency": None}, "no_frequency", "frequency"),
        ({"frequency": "hourly"}, "unknown_frequency", "hourly"),
        ({"timezone": "Mars/Olympus"}, "invalid_cadence", "Mars/Olympus"),
        ({"due_anchor": "period_middle"}, "invalid_cadence", "period_middle"),
        ({"lead_days": True}, "invalid_cadence", "True"),
        ({"lead_days": "7"}, "invalid_cadence", "'7'"),
        ({"due_offset_days": 1.5}, "invalid_cadence", "1.5"),
    ],
)
def test_a_broken_duty_is_a_fault_and_the_others_are_still_planned(
    fields: dict[str, Any], reason: str, named: str
) -> None:
    plan = plan_dispatch([duty("bad", **fields), duty("good")], NOW)
    assert keys(plan) == ["2026-08"]
    assert [(f.duty_id, f.reason) for f in plan.faults] == [("bad", reason)]
    assert named in plan.faults[0].detail


def test_null_cadence_fields_read_as_column_defaults() -> None:
    nulls = duty("d1", timezone=None, due_anchor=None, due_offset_days=None, lead_days=None)
    defaults = duty("d1", timezone="UTC", due_anchor="period_start", due_offset_days=0, lead_days=7)
    at = datetime(2026, 8, 26, 12, 0, tzinfo=UTC)  # inside the default 7-day lead of September
    assert plan_dispatch([nulls], at).drafts == plan_dispatch([defaults], at).drafts
    assert keys(plan_dispatch([nulls], at)) == ["2026-08", "2026-09"]


def test_the_current_period_is_owed_even_before_its_own_visible_from() -> None:
    late = duty("d1", due_anchor="period_end", lead_days=3)  # due 31st, visible from 28th
    plan = plan_dispatch([late], datetime(2026, 8, 2, tzinfo=UTC))
    assert plan.drafts[0]["period_key"] == "2026-08"
    assert plan.drafts[0]["visible_from"] == date(2026, 8, 28)


def test_a_future_period_is_owed_once_its_lead_window_opens() -> None:
    monthly = duty("d1", lead_days=7)  # next month's task is due on the 1st, visible 7 days ahead
    assert keys(plan_dispatch([monthly], datetime(2026, 8, 24, 23, 59, tzinfo=UTC))) == ["2026-08"]
    assert keys(plan_dispatch([monthly], datetime(2026, 8, 25, 0, 0, tzinfo=UTC))) == [
        "2026-08",
        "2026-09",
    ]


@pytest.mark.parametrize("lead", [0, -5])
def test_a_zero_or_negative_lead_still_owes_the_current_period(lead: int) -> None:
    assert keys(plan_dispatch([duty("d1", lead_days=lead)], NOW)) == ["2026-08"]


def test_visible_from_is_not_clamped_into_the_period() -> None:
    early = duty("d1", due_offset_days=2, lead_days=7)  # due the 3rd, visible in the month before
    plan = plan_dispatch([early], datetime(2026, 9, 1, tzinfo=UTC))
    assert plan.drafts[0]["due_date"] == date(2026, 9, 3)
    assert plan.drafts[0]["visible_from"] == date(2026, 8, 27)


def test_shanghai_and_los_angeles_get_their_own_local_period_on_one_utc_clock() -> None:
    now = datetime(2026, 8, 31, 20, 0, tzinfo=UTC)  # Sept 1st in Shanghai, Aug 31st in LA
    plan = plan_dispatch(
        [
            duty("sh", timezone="Asia/Shanghai", lead_days=0),
            duty("la", timezone="America/Los_Angeles", lead_days=0),
        ],
        now,
    )
    assert keys(plan, "sh") == ["2026-09"]
    assert keys(plan, "la") == ["2026-08"]


def test_a_duty_outside_its_effective_window_today_is_skipped() -> None:
    plan = plan_dispatch(
        [
            duty("early", effective_from=date(2026, 9, 1)),
            # Ended before the origin's day (the 20th): a duty no run kept
            # owes from it, and nothing in its window.
            duty("ended", effective_to=date(2026, 8, 19)),
            duty("inside", effective_from=date(2026, 8, 21), effective_to=date(2026, 8, 21)),
        ],
        NOW,
    )
    # 'inside' is in its window today, but August was due on the 1st, before it began.
    assert reasons(plan) == {
        "early": "outside_effective_window",
        "ended": "outside_effective_window",
        "inside": "nothing_due",
    }
    assert keys(plan) == []
    assert plan.skip_counts() == {"nothing_due": 1, "outside_effective_window": 2}


def test_a_window_that_ended_on_a_change_s_day_still_owes_what_the_change_owes() -> None:
    # NOW is 08-21; each window ended on 08-20, the origin's day. A change
    # placed that day (or, for a duty no run kept, the origin) owes the
    # current period in the window; an account kept through that day with
    # no change owes nothing more (docs/contract.md#account).
    ended = date(2026, 8, 20)
    plan = plan_dispatch(
        [
            {
                **duty("changed", effective_to=ended),
                "dispatch_through": ended,
                "dispatch_changed_on": ended,
            },
            {**duty("kept", effective_to=ended), "dispatch_through": ended},
            duty("no run kept", effective_to=ended),
        ],
        NOW,
    )
    assert keys(plan, "changed") == ["2026-08"]
    assert keys(plan, "no run kept") == ["2026-08"]
    assert reasons(plan) == {"kept": "outside_effective_window"}


def test_effective_window_is_tested_on_the_duty_local_today() -> None:
    # 2026-08-31T20:00Z is already September 1st in Shanghai.
    now = datetime(2026, 8, 31, 20, 0, tzinfo=UTC)
    starts_sept = {"effective_from": date(2026, 9, 1), "lead_days": 0}
    plan = plan_dispatch(
        [duty("sh", timezone="Asia/Shanghai", **starts_sept), duty("utc", **starts_sept)], now
    )
    assert keys(plan) == ["2026-09"]
    assert reasons(plan) == {"utc": "outside_effective_window"}


def test_a_candidate_due_outside_the_effective_window_is_dropped() -> None:
    ending = duty("d1", due_anchor="period_end", effective_to=date(2026, 9, 15), lead_days=40)
    plan = plan_dispatch([ending], datetime(2026, 8, 25, tzinfo=UTC))
    assert keys(plan) == ["2026-08"]  # September is due on the 30th, after the duty ends


def test_a_task_row_copies_and_denormalises_the_duty() -> None:
    source = duty(
        "d1", organization_id="org-9", name="File it", owner_id="ann", business_unit_id="bu-7",
        source="assigned", due_offset_days=4,
    )  # fmt: skip
    (draft,) = plan_dispatch([source], NOW).drafts
    assert draft == {
        "organization_id": "org-9",
        "duty_id": "d1",
        "owner_id": "ann",
        "business_unit_id": "bu-7",
        "subject": "File it",
        "source": "assigned",
        "period_key": "2026-08",
        "due_date": date(2026, 8, 5),
        "visible_from": date(2026, 7, 29),
        "late_after": date(2026, 8, 5),
        "status": "open",
    }
    assert set(draft) == set(TASK_COLUMNS)


def test_backfill_owes_every_period_of_the_window_without_visibility_or_today_tests() -> None:
    window = Window(date(2025, 8, 1), date(2026, 8, 31))
    ended = duty("d1", effective_from=date(2025, 1, 1), effective_to=date(2026, 3, 31))
    plan = plan_dispatch([duty("all"), ended], NOW, window)
    assert keys(plan, "all") == [f"2025-{m:02}" for m in range(8, 13)] + [
        f"2026-{m:02}" for m in range(1, 9)
    ]
    # Its due dates still have to fall inside the duty's own effective window.
    assert keys(plan, "d1") == [f"2025-{m:02}" for m in range(8, 13)] + [
        "2026-01",
        "2026-02",
        "2026-03",
    ]


def test_backfill_from_alone_runs_up_to_the_duty_local_today() -> None:
    now = datetime(2026, 8, 31, 20, 0, tzinfo=UTC)
    window = Window(date(2026, 7, 1))
    plan = plan_dispatch([duty("sh", timezone="Asia/Shanghai"), duty("utc")], now, window)
    assert keys(plan, "sh") == ["2026-07", "2026-08", "2026-09"]
    assert keys(plan, "utc") == ["2026-07", "2026-08"]


def test_duties_that_share_a_cadence_get_the_same_periods_and_dates() -> None:
    plan = plan_dispatch([duty("a"), duty("b", owner_id="bob")], NOW)
    first, second = plan.drafts
    assert (first["period_key"], first["due_date"]) == (second["period_key"], second["due_date"])


def test_a_lead_reaching_past_year_9999_owes_what_the_calendar_holds() -> None:
    plan = plan_dispatch([duty("d1", lead_days=30)], datetime(9999, 12, 20, tzinfo=UTC))
    assert keys(plan) == ["9999-12"]


def test_a_lead_reaching_back_before_1583_is_a_fault_not_a_crash() -> None:
    plan = plan_dispatch([duty("d1", lead_days=30)], datetime(1583, 1, 10, tzinfo=UTC))
    assert [(f.duty_id, f.reason) for f in plan.faults] == [("d1", "invalid_cadence")]


def test_a_naive_clock_is_refused_rather_than_blamed_on_every_duty() -> None:
    with pytest.raises(ValueError, match="naive"):
        plan_dispatch([duty("d1")], datetime(2026, 8, 21, 1, 0))

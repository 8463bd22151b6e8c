"""The planner's review gate, grace, due dates after the period and rolls.

See docs/contract.md#due-dates, #one-run.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from dispatch_fn.planning import Plan, Window, plan_dispatch
from support import NOW, duty

BACKFILL = Window(date(2026, 1, 1), date(2026, 3, 31))


def reasons(plan: Plan) -> dict[str, str]:
    return {skip.duty_id: skip.reason for skip in plan.skipped}


def drafts_of(plan: Plan, duty_id: str) -> list[dict[str, Any]]:
    return [draft for draft in plan.drafts if draft["duty_id"] == duty_id]


# --- the review gate ---


@pytest.mark.parametrize("review", ["to_confirm", "to_review", "returned", None, "bogus"])
@pytest.mark.parametrize("window", [None, BACKFILL], ids=["scheduled", "backfill"])
def test_only_an_approved_definition_is_dispatched(review: str | None, window: Window) -> None:
    plan = plan_dispatch([duty("d1", review_status=review), duty("d2")], NOW, window)
    assert reasons(plan) == {"d1": "not_approved"}
    assert drafts_of(plan, "d1") == []
    assert drafts_of(plan, "d2")
    assert plan.faults == []  # not a fault: the run is not degraded


def test_an_absent_review_status_reads_as_its_default_approved() -> None:
    row = duty("d1")
    del row["review_status"]
    assert [d["period_key"] for d in plan_dispatch([row], NOW).drafts] == ["2026-08"]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"form": "standing", "review_status": "to_review"}, "standing"),
        ({"form": "one_off", "review_status": None}, "one_off"),
        ({"form": "bogus", "review_status": "returned"}, "unknown_form"),
        ({"status": "paused", "review_status": "to_review"}, "not_active"),
        ({"review_status": "to_review", "timezone": "Mars/Olympus"}, "not_approved"),
        ({"review_status": "returned", "frequency": None}, "not_approved"),
        ({"review_status": "to_confirm", "effective_to": date(2020, 1, 1)}, "not_approved"),
    ],
)
def test_the_gate_takes_its_place_in_the_order_of_reasons(
    fields: dict[str, Any], reason: str
) -> None:
    assert reasons(plan_dispatch([duty("d1", **fields)], NOW)) == {"d1": reason}


# --- grace and lateness ---


@pytest.mark.parametrize(
    ("grace", "due", "late"),
    [
        (0, date(2026, 8, 1), date(2026, 8, 1)),
        (None, date(2026, 8, 1), date(2026, 8, 1)),
        (7, date(2026, 8, 1), date(2026, 8, 8)),
        (7, date(2026, 8, 28), date(2026, 9, 4)),  # across a month end
    ],
)
def test_late_after_is_the_due_date_plus_the_duty_grace(
    grace: int | None, due: date, late: date
) -> None:
    offset = (due - date(2026, 8, 1)).days
    (draft,) = plan_dispatch([duty("d1", grace_days=grace, due_offset_days=offset)], NOW).drafts
    assert (draft["due_date"], draft["late_after"]) == (due, late)


# --- due dates after the period, and rolls ---


def test_the_three_compliance_shapes_plan_their_due_dates() -> None:
    vat = duty(
        "vat", frequency="quarterly", due_anchor="after_period_end", due_offset_days=20,
        due_roll="following", holiday_calendar="GB-SCT",
    )  # fmt: skip
    payroll = duty(
        "payroll", frequency="monthly", due_anchor="after_period_end", due_offset_days=15,
        holiday_calendar="US",
    )  # fmt: skip
    annual = duty(
        "annual", frequency="annual", due_anchor="after_period_end", due_offset_months=4,
    )  # fmt: skip
    plan = plan_dispatch([vat, payroll, annual], NOW, Window(date(2026, 1, 1), date(2026, 12, 31)))
    due = {(d["duty_id"], d["period_key"]): d["due_date"] for d in plan.drafts}
    assert due["vat", "2026-Q3"] == date(2026, 10, 20)  # a Tuesday
    assert due["vat", "2026-Q2"] == date(2026, 7, 20)  # a Monday
    assert due["vat", "2026-Q1"] == date(2026, 4, 20)
    assert due["payroll", "2026-08"] == date(2026, 9, 15)
    assert due["payroll", "2026-05"] == date(2026, 6, 15)
    assert due["annual", "2026"] == date(2027, 4, 30)


def test_a_task_due_after_its_period_still_reports_on_that_period() -> None:
    # Scheduled in August: the current period is August, due on 15 September.
    payroll = duty("p", due_anchor="after_period_end", due_offset_days=15, lead_days=0)
    (draft,) = plan_dispatch([payroll], NOW).drafts
    assert (draft["period_key"], draft["due_date"], draft["visible_from"]) == (
        "2026-08",
        date(2026, 9, 15),
        date(2026, 9, 15),
    )


def test_after_the_period_the_effective_window_holds_the_period_last_day() -> None:
    # The duty ended with June: June is still owed although it is due in July.
    ended = duty(
        "p", due_anchor="after_period_end", due_offset_days=15, effective_to=date(2026, 6, 30)
    )
    plan = plan_dispatch([ended], NOW, Window(date(2026, 5, 1), date(2026, 8, 1)))
    assert [d["period_key"] for d in plan.drafts] == ["2026-05", "2026-06"]


def test_a_rolled_due_date_moves_its_visibility_with_it() -> None:
    # 1 August 2026 is a Saturday; following rolls it to Monday the 3rd.
    (draft,) = plan_dispatch([duty("d1", due_roll="following", lead_days=2)], NOW).drafts
    assert (draft["due_date"], draft["visible_from"]) == (date(2026, 8, 3), date(2026, 8, 1))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"due_offset_months": 1}, "due_offset_months 1"),
        ({"due_anchor": "after_period_end", "due_offset_months": 25}, "due_offset_months 25"),
        ({"due_anchor": "after_period_end", "due_offset_days": -3}, "due_offset_days -3"),
        ({"due_anchor": "after_period_end", "due_offset_days": 400}, "due_offset_days 400"),
        ({"due_roll": "sideways"}, "'sideways'"),
        ({"holiday_calendar": "ZZ"}, "'ZZ'"),
        ({"holiday_calendar": "US-XX", "due_roll": "following"}, "'US-XX'"),
        ({"grace_days": 400}, "grace_days 400"),
        ({"grace_days": -1}, "grace_days -1"),
    ],
)
def test_a_due_rule_the_engine_refuses_is_an_invalid_cadence_fault(
    fields: dict[str, Any], named: str
) -> None:
    plan = plan_dispatch([duty("bad", **fields), duty("good")], NOW)
    (fault,) = plan.faults
    assert (fault.duty_id, fault.reason) == ("bad", "invalid_cadence")
    assert named in fault.detail
    assert [d["duty_id"] for d in plan.drafts] == ["good"]

"""What a run owes, decided without I/O: the planner, a run's request, the calendar's edges.

``plan`` is the contract's planner (``plan.plan_dispatch``) and the rules the
database path asks once per group of duties; ``request`` what one run is
asked to do; ``calendar_edge`` the planner's judgement of duties near the
calendar's first and last years; ``page_plan`` the sizes, weights and rolled
days a run's page statements bind, a namespace of its own (``page_plan.budget``).
Other packages import from here.
"""

from dispatch_fn.planning import page_plan
from dispatch_fn.planning.calendar_edge import Edge, near_edge, schedule_within_calendar
from dispatch_fn.planning.plan import (
    FAULT_REASONS,
    FORMS,
    LEAD_THRESHOLDS,
    OWED_RULES,
    SCHEDULE_INTERVAL,
    SKIP_REASONS,
    Account,
    Cadence,
    Fault,
    FaultReason,
    Judgement,
    NotOwed,
    Period,
    Plan,
    Schedule,
    SkipReason,
    Window,
    WindowLike,
    account_judged,
    became_owed_on,
    check_cadence_rule,
    classify,
    judge_duty,
    lapsed_before_candidates,
    lead_bucket,
    next_owed_from,
    origin_clock,
    period_after,
    period_holding,
    plan_dispatch,
    previous_clock,
    unknown_form_detail,
)
from dispatch_fn.planning.request import (
    MODES,
    SHOWN_STATUSES,
    STATUSES,
    Afresh,
    RunRequest,
    Scope,
)

__all__ = [
    "FAULT_REASONS",
    "FORMS",
    "LEAD_THRESHOLDS",
    "MODES",
    "OWED_RULES",
    "SCHEDULE_INTERVAL",
    "SHOWN_STATUSES",
    "SKIP_REASONS",
    "STATUSES",
    "Account",
    "Afresh",
    "Cadence",
    "Edge",
    "Fault",
    "FaultReason",
    "Judgement",
    "NotOwed",
    "Period",
    "Plan",
    "RunRequest",
    "Schedule",
    "Scope",
    "SkipReason",
    "Window",
    "WindowLike",
    "account_judged",
    "became_owed_on",
    "check_cadence_rule",
    "classify",
    "judge_duty",
    "lapsed_before_candidates",
    "lead_bucket",
    "near_edge",
    "next_owed_from",
    "origin_clock",
    "page_plan",
    "period_after",
    "period_holding",
    "plan_dispatch",
    "previous_clock",
    "schedule_within_calendar",
    "unknown_form_detail",
]

"""Why a duty got, or did not get, a task: the planner's verdict per candidate period.

``python -m dispatch_fn explain DUTY_ID`` and a dry run naming ``duty_ids``
both answer from ``plan.judge_duty`` — the same decisions a run makes — plus
one look at which of the owed tasks already exist.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from dispatch_fn.db import Connection, ledger, lookups
from dispatch_fn.engine import (
    local_date,
    period_bounds,
)
from dispatch_fn.errors import PeriodError
from dispatch_fn.planning import (
    FAULT_REASONS,
    SCHEDULE_INTERVAL,
    Account,
    Judgement,
    NotOwed,
    SkipReason,
    WindowLike,
    account_judged,
    became_owed_on,
    judge_duty,
    next_owed_from,
    origin_clock,
    period_after,
    period_holding,
    previous_clock,
)
from dispatch_fn.run import _rules
from dispatch_fn.run._lapses import lapsed_unseen
from dispatch_fn.settings import DEFAULT_CATCH_UP_DAYS

# A dry run explains at most this many duties in its report (docs/contract.md#explain).
MAX_EXPLAINED: Final = 100
# A dry run's explanations grow with duties times periods (a daily duty over
# five years is ~400 KB); Lambda refuses a response over 6 MB.
EXPLAIN_BYTES: Final = 1_000_000


def explain(
    conn: Connection,
    duty_ids: Sequence[str],
    now: datetime,
    window: WindowLike | None = None,
    *,
    interval: timedelta = SCHEDULE_INTERVAL,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
    rules: str | None = None,
    organization_id: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Each duty's explanation at clock ``now`` (or for backfill ``window``), by id.

    ``interval`` back is the previous scheduled clock, ``catch_up_days`` the
    horizon and ``rules`` those judged by (None: this build's), as in a run;
    ``organization_id``, the one whose duties are meant (None: any). An id
    with no stored duty is explained as ``found: false``; one that several
    organisations hold, none named, as the list of them.
    """
    return dict(
        explain_each(
            conn,
            duty_ids,
            now,
            window,
            interval=interval,
            catch_up_days=catch_up_days,
            rules=rules,
            organization_id=organization_id,
        )
    )


def explain_each(
    conn: Connection,
    duty_ids: Sequence[str],
    now: datetime,
    window: WindowLike | None = None,
    *,
    interval: timedelta = SCHEDULE_INTERVAL,
    catch_up_days: int = DEFAULT_CATCH_UP_DAYS,
    rules: str | None = None,
    organization_id: str | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``explain``'s pairs one duty at a time, in the order named, each id once.

    Each is computed only when asked for, so a caller that stops early (the
    dry run's response budget) never builds the rest: one daily duty over
    five years is 1,826 candidates.
    """
    wanted = list(dict.fromkeys(duty_ids))
    held = lookups.duty_rows(conn, wanted, organization_id)
    schedules: dict[Any, Any] = {}
    # An account no run kept owes from the first run's origin, as the run
    # that reads it takes it from the ledger; a backfill owes its window.
    previous = (
        previous_clock(now, interval)
        if window is not None
        else origin_clock(ledger.earliest_clock(conn), now, interval)
    )
    # Rules changed since the previous run judge every account afresh, and
    # one that run set aside while judging it afresh is judged so still, as
    # the run that reads the duty does (run.recorded).
    judged_by = _rules.current() if rules is None else rules
    afresh = _rules.afresh(ledger.previous_judgement(conn), judged_by)
    for duty_id in wanted:
        rows = held.get(duty_id, [])
        if not rows:
            yield duty_id, {"duty_id": duty_id, "found": False}
            continue
        if len(rows) > 1:
            # On a layout keyed by (organization_id, id) the id repeats
            # (docs/adr/0005): which duty is meant is the asker's to say.
            yield duty_id, _held_by_several(duty_id, rows)
            continue
        row = rows[0]
        owed_at = afresh.owed_at((row.get("organization_id"), duty_id))
        judgement = judge_duty(
            row,
            now,
            window,
            schedules,
            previous=previous,
            catch_up_days=catch_up_days,
            rejudge=afresh.every,
            owed_afresh_at=owed_at,
        )
        keys = [candidate.period.key for candidate in judgement.candidates]
        today = None if window is not None else _local_day(now, judgement.cadence.timezone)
        explained = _as_json(
            row,
            judgement,
            lookups.existing_tasks(conn, row, keys),
            today,
            account_judged(
                Account.of(row),
                today,
                row.get("effective_to"),
                rejudge=afresh.every,
                owed_on=None
                if owed_at is None
                else _local_day(owed_at, judgement.cadence.timezone),
            ),
        )
        # Older than the first candidate, where a scheduled run's page flags
        # it too; judged with the schedules judge_duty planned at this clock.
        explained["account"]["lapsed_before_candidates"] = (
            window is None
            # Nothing due among the candidates: a window closed behind them
            # may still have let older periods lapse (the page flags it too).
            and (judgement.skip is None or judgement.skip.reason == SkipReason.NOTHING_DUE)
            and lapsed_unseen(
                conn,
                row,
                Account.of(row),
                now,
                previous=previous,
                catch_up_days=catch_up_days,
                rejudge=afresh.every,
                owed_afresh_at=owed_at,
                schedules=schedules,
            )
        )
        yield duty_id, explained


def _as_json(
    row: dict[str, Any],
    judgement: Judgement,
    existing: dict[str, lookups.ExistingTask],
    today: date | None,
    account: Account,
) -> dict[str, Any]:
    skip = judgement.skip
    cadence = judgement.cadence
    candidates = []
    for candidate in judgement.candidates:
        task = existing.get(candidate.period.key)
        if task is not None:
            verdict: dict[str, Any] = {
                "verdict": "exists",
                "task_id": task.task_id,
                "created_at": task.created_at.isoformat(),
            }
        elif candidate.not_owed is None:
            verdict = {"verdict": "would_create"}
        else:
            verdict = {"verdict": "not_owed", "reason": str(candidate.not_owed)}
        candidates.append(
            {
                "period_key": candidate.period.key,
                **_bounds(str(cadence.frequency), candidate.period.key, cadence.timezone),
                "due_date": candidate.due_date.isoformat(),
                "visible_from": candidate.visible_from.isoformat(),
                "late_after": candidate.late_after.isoformat(),
                **verdict,
            }
        )
    return {
        "duty_id": judgement.duty_id,
        "found": True,
        "organization_id": row.get("organization_id"),
        "name": row.get("name"),
        "frequency": cadence.frequency,
        "timezone": cadence.timezone,
        # The period holding the clock: owed from its first day, even before its visible_from.
        "current_period": next(
            (c.period.key for c in judgement.candidates if c.period.current), None
        ),
        "due_rule": {
            "due_anchor": cadence.due_anchor,
            "due_offset_months": cadence.due_offset_months,
            "due_offset_days": cadence.due_offset_days,
            "due_roll": cadence.due_roll,
            "holiday_calendar": cadence.holiday_calendar,
            "lead_days": cadence.lead_days,
            "grace_days": cadence.grace_days,
        },
        "skip": None
        if skip is None
        else {
            "reason": str(skip.reason),
            "detail": skip.detail,
            "fault": skip.reason in FAULT_REASONS,
        },
        "account": _account(row, judgement, today, account),
        "candidates": candidates,
    }


def _account(
    row: dict[str, Any], judgement: Judgement, today: date | None, account: Account
) -> dict[str, str | list[list[str | None]] | None]:
    """The duty's account (docs/contract.md#account), and the day it next owes a period.

    ``next_owed``: the earliest day a candidate not yet visible becomes owed,
    else the day the first period after the candidates (for a duty whose
    window has not opened, from the period holding ``today``) that passes
    the effective window becomes owed; null when none ever does.
    ``dispatch_owed_between``: the spans a resume opened (migration 0016).
    ``dispatch_recast_on``: the day of the latest change that replaced a
    cadence which still owed (0017; the report's ``changed_while_owed``).
    ``dispatch_next``: the day a scheduled run next reads it, as the last run
    that kept its account left it (0001-01-01: the next run), and
    ``dispatch_next_at`` the instant a scheduled run's clock must reach.
    ``account``: as the run judges it (``Account.rejudged`` under new rules).
    """
    ahead = [
        became_owed_on(
            candidate.period,
            candidate.visible_from,
            judgement.cadence.lead_days,
            row.get("effective_from"),
        )
        for candidate in judgement.candidates
        if candidate.not_owed is NotOwed.NOT_VISIBLE_YET
    ]
    # Not visible yet is judged before the account: a day its pause holds
    # owes nothing.
    ahead = [day for day in ahead if account.owes_on(day)]
    return {
        "dispatch_through": _day(account.through),
        "dispatch_paused_on": _day(account.paused_on),
        "dispatch_changed_on": _day(account.changed_on),
        # The latest change that replaced a cadence which still owed (0017).
        "dispatch_recast_on": _day(row.get("dispatch_recast_on")),
        # The spans a resume opened while a pause bounds the account (0016):
        # first and last day, the last null while the span is open.
        "dispatch_owed_between": [
            [_day(first), None if end is None else _day(end - timedelta(days=1))]
            for first, end in account.owed_between
        ],
        "next_owed": _day(_next_owed(row, judgement, today, account, ahead)),
        # The day from which a scheduled run reads the duty (migration 0014),
        # and the instant its clock must reach (0016).
        "dispatch_next": _day(row.get("dispatch_next")),
        "dispatch_next_at": _instant(row.get("dispatch_next_at")),
    }


def _after_candidates(
    row: dict[str, Any], judgement: Judgement, today: date | None, account: Account
) -> date | None:
    """The day the first period past the candidates that the window and account owe becomes owed."""
    cadence = judgement.cadence
    if judgement.candidates:
        last = judgement.candidates[-1].period
        start = period_after(str(cadence.frequency), last.key, cadence.timezone)
        window = (row.get("effective_from"), row.get("effective_to"))
        return None if start is None else next_owed_from(cadence, start, window, account=account)
    opens = row.get("effective_from")
    skip = judgement.skip
    if (
        skip is not None
        and skip.reason == SkipReason.OUTSIDE_EFFECTIVE_WINDOW
        and today is not None
        and opens is not None
        and today < opens
    ):
        # Its window has not opened: no candidates, the current period first.
        return _owed_from(row, judgement, today, account=account)
    return None  # skipped otherwise, or faulted: no next owed day to tell


def _owed_from(
    row: dict[str, Any],
    judgement: Judgement,
    day: date,
    *,
    after: date | None = None,
    account: Account | None = None,
) -> date | None:
    """``next_owed_from`` the period holding ``day``, within the duty's window."""
    cadence = judgement.cadence
    window = (row.get("effective_from"), row.get("effective_to"))
    start = period_holding(str(cadence.frequency), day, cadence.timezone)
    return (
        None
        if start is None
        else next_owed_from(cadence, start, window, after=after, account=account)
    )


def _next_owed(
    row: dict[str, Any],
    judgement: Judgement,
    today: date | None,
    account: Account,
    ahead: Sequence[date],
) -> date | None:
    """The day the duty next owes a period, as the next run judges it.

    At a clock before the account's day a run owes nothing: the account says
    the runs up to its day dispatched what became owed by then. A change
    after the clock (or, judged afresh, after the account's day) owes the
    period holding its day, and those its lead opens, as of that day.
    """
    skip = judgement.skip
    owing = skip is None or skip.reason in _STILL_OWING
    through, changed = account.through, account.changed_on
    if today is not None and through is not None and today < through:
        if not owing:
            return None
        found = _owed_from(row, judgement, through, after=through, account=account)
    else:
        found = min(ahead, default=None) or _after_candidates(row, judgement, today, account)
    if owing and today is not None and changed is not None and today < changed < date.max:
        # A change owes the period holding its day, and later ones, as of that day.
        by_change = _owed_from(row, judgement, changed)
        if by_change is not None:
            found = min(max(by_change, changed), found or date.max)
    return found


# Skips that leave a duty owing later: a window not open yet, nothing due at this clock.
_STILL_OWING: Final = (SkipReason.OUTSIDE_EFFECTIVE_WINDOW, SkipReason.NOTHING_DUE)


def _spans(spans: list[list[str | None]]) -> str:
    if not spans:
        return ""
    shown = ", ".join(f"{first} to {last or 'now'}" for first, last in spans)
    return f", owed again {shown}"


def _lapsed(account: dict[str, Any]) -> str:
    return ", periods before the candidates lapsed" if account["lapsed_before_candidates"] else ""


def _recast(day: str | None) -> str:
    return "" if day is None else f", recast on {day} while owed"


def _local_day(instant: datetime, timezone: str) -> date | None:
    try:
        return local_date(instant, timezone)
    except PeriodError:  # a zone the engine refused: the duty has no candidates then
        return None


def _instant(instant: datetime | None) -> str | None:
    return None if instant is None else instant.astimezone(UTC).isoformat()


def _day(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


def _bounds(frequency: str, key: str, timezone: str) -> dict[str, str | None]:
    try:
        bounds = period_bounds(frequency, key, timezone)
    except PeriodError:  # the last period of year 9999 has no end instant
        return {"start": None, "end": None}
    return {"start": bounds.start.isoformat(), "end": bounds.end.isoformat()}


def _held_by_several(duty_id: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    organizations = sorted(str(row["organization_id"]) for row in rows)
    return {
        "duty_id": duty_id,
        "found": True,
        "organizations": organizations,
        "detail": (
            f"duty id {duty_id!r} is held by {len(organizations)} organisations "
            f"({', '.join(organizations)}); name one"
        ),
    }


def render_explanation(explained: dict[str, Any], clock: str) -> str:
    """One duty's explanation as a readable table."""
    if not explained["found"]:
        return f"duty {explained['duty_id']!r} is unknown"
    if "organizations" in explained:
        return str(explained["detail"])
    lines = [
        f"duty {explained['duty_id']} ({explained['name']}): {explained['frequency']} in "
        f"{explained['timezone']}, at {clock}"
    ]
    lines.append(f"  {_due_rule_line(explained['due_rule'])}")
    account = explained["account"]
    lines.append(
        f"  account: dispatched through {account['dispatch_through'] or '-'}, paused on "
        f"{account['dispatch_paused_on'] or '-'}, changed on "
        f"{account['dispatch_changed_on'] or '-'}{_spans(account['dispatch_owed_between'])}"
        f"{_recast(account['dispatch_recast_on'])}{_lapsed(account)}, "
        f"next owed {account['next_owed'] or '-'}, "
        f"read from {account['dispatch_next'] or '-'} ({account['dispatch_next_at'] or '-'})"
    )
    skip = explained["skip"]
    if skip is not None:
        kind = "fault" if skip["fault"] else "skipped"
        detail = f": {skip['detail']}" if skip["detail"] else ""
        lines.append(f"  {kind}: {skip['reason']}{detail}")
    if explained["candidates"]:
        lines.append(
            f"  {'period':<12}{'starts':<27}{'due':<12}{'visible':<12}{'late after':<12}verdict"
        )
    for c in explained["candidates"]:
        why = {
            "exists": f"exists (task {c.get('task_id')}, created {c.get('created_at')})",
            "would_create": "would create",
            "not_owed": f"not owed: {c.get('reason')}",
        }[c["verdict"]]
        if _owed_before_visible(explained, c, clock):
            why += " (current period: owed from its first day, before its visible date)"
        lines.append(
            f"  {c['period_key']:<12}{c['start'] or '-':<27}{c['due_date']:<12}"
            f"{c['visible_from']:<12}{c['late_after']:<12}{why}"
        )
    return "\n".join(lines)


def _owed_before_visible(explained: dict[str, Any], candidate: dict[str, Any], clock: str) -> bool:
    """Whether the current period's task was (or would be) created before its visible_from day.

    docs/contract.md#account: the current period is owed from its first day, so its task
    may exist before the day the lead would first show it; the table says why.
    """
    if candidate["period_key"] != explained.get("current_period"):
        return False
    verdict = candidate["verdict"]
    if verdict == "not_owed":
        return False
    created = candidate["created_at"] if verdict == "exists" else clock
    day = _local_day(datetime.fromisoformat(created), explained["timezone"])
    return day is not None and day.isoformat() < candidate["visible_from"]


def _due_rule_line(rule: dict[str, Any]) -> str:
    """The duty's due rule in words: anchor and offsets, roll and calendar, lead and grace."""
    months = f" + {rule['due_offset_months']} month(s)" if rule["due_offset_months"] else ""
    calendar = rule["holiday_calendar"] or "none (Saturday and Sunday off)"
    return (
        f"due: {rule['due_anchor']}{months} + {rule['due_offset_days']} day(s), "
        f"roll {rule['due_roll']}, calendar {calendar}; "
        f"lead {rule['lead_days']} day(s), grace {rule['grace_days']} day(s)"
    )

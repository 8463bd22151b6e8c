"""Periods older than a run's candidates that lapsed past the horizon and are not in duly_task.

The run counts them (``beyond_horizon``) for the duties its pages flagged;
``explain`` says so of the duty it judges (``lapsed_before_candidates``). One
rule for both: the planner names the periods, and one that a backfill
created (it is in ``duly_task``) is not counted (docs/contract.md#account).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from dispatch_fn.db import Connection, lookups
from dispatch_fn.planning import Account, lapsed_before_candidates


def lapsed_unseen(
    conn: Connection,
    duty: Mapping[str, Any],
    account: Account,
    now: datetime,
    *,
    previous: datetime | None = None,
    origin: date | None = None,
    catch_up_days: int,
    rejudge: bool,
    owed_afresh_at: datetime | None,
    schedules: dict[Any, Any],
) -> bool:
    """Whether ``account`` let a period older than the candidates lapse that ``duly_task`` lacks.

    ``schedules``: the planner's schedule memo, shared by calls at one clock.
    """
    keys = lapsed_before_candidates(
        duty,
        account,
        now,
        previous=previous,
        origin=origin,
        catch_up_days=catch_up_days,
        rejudge=rejudge,
        owed_afresh_at=owed_afresh_at,
        schedules=schedules,
    )
    return lookups.any_task_missing(conn, duty, keys)

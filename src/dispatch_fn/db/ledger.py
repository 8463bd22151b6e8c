"""The run ledger's statements: ``duly_dispatch_run``, one row per invocation.

See docs/contract.md#ledger.

Each is one short statement on an autocommit connection, issued before a
run's first page or after its last, so the ledger never sits inside a page's
transaction and never holds a lock a page waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from dispatch_fn.db.sql import Connection, named_row, named_rows, statement
from dispatch_fn.engine import local_dates
from dispatch_fn.planning import STATUSES, RunRequest

# The function's Timeout in template.yaml (a template test holds them equal):
# a run still 'running' after this long was killed, not slow.
FUNCTION_TIMEOUT: Final = timedelta(seconds=900)
# What a list of runs keeps of each (`runs`, the runs query): a sample of the scope's
# duty ids, and its free text clipped; `one` gives a run whole.
LISTED_IDS: Final = 10
LISTED_TEXT_CHARS: Final = 400
LISTED_ERROR_CHARS: Final = 2000


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One run as the ``runs`` command shows it."""

    fields: dict[str, Any]

    @property
    def shown_status(self) -> str:
        """The status, ``abandoned`` for a run still running past the function's timeout."""
        return "abandoned" if self.fields["abandoned"] else str(self.fields["status"])


def _request_params(request: RunRequest) -> dict[str, Any]:
    window = request.window
    return {
        "mode": request.mode,
        "clock": request.now,
        "window_from": None if window is None else window.from_date,
        "window_to": None if window is None else window.to_date,
        "organization_id": request.scope.organization_id,
        "duty_ids": None if request.scope.duty_ids is None else list(request.scope.duty_ids),
        "dry_run": request.dry_run,
        "resume_after": request.resume_after,
    }


def start(
    conn: Connection,
    request: RunRequest,
    *,
    request_id: str | None,
    continues_run: int | None,
    rules: str | None = None,
    started_at: datetime | None = None,
) -> int:
    """Record a run as ``running``, judged by ``rules``; return its id (the report's ``run_id``).

    A non-dry scheduled run's clock is the one the trigger places edits at:
    the ledger keeps the local days the engine judges for it where the
    server's tz data reads them otherwise (migration 0020). ``started_at``
    is the wall clock the run judged its clock by, recorded where it is
    later than the server's: a run whose clock is not later than it keeps
    accounts, and is a latest clock the trigger places edits at.
    """
    scheduled = request.mode == "scheduled" and not request.dry_run
    params = {
        **_request_params(request),
        "request_id": request_id,
        "continues_run": continues_run,
        "continuation": request.continuation,
        "rules": rules,
        "started_at": started_at,
        **(_engine_days(request.now) if scheduled else {"zones": None, "days": None}),
    }
    row = named_row(conn.execute(statement("run_start"), params))
    assert row is not None  # noqa: S101 - an insert with RETURNING returns its row
    return int(row["id"])


def record_engine_days(conn: psycopg.Connection[Any]) -> int:
    """Record the engine's local days of the latest scheduled clocks that recorded none.

    Runs before migration 0020 recorded none, and the trigger would place an
    edit made before the next scheduled run on the server's day; the
    migration step calls this once it has applied 0020. Returns the clocks
    recorded.
    """
    clocks = [
        row["clock"] for row in named_rows(conn.execute(statement("run_engine_days_missing")))
    ]
    for clock in clocks:
        conn.execute(statement("run_engine_days_record"), {"clock": clock, **_engine_days(clock)})
    return len(clocks)


def _engine_days(clock: datetime) -> dict[str, list[Any]]:
    """``clock``'s local day in every zone the engine knows, as the statements bind them."""
    days = local_dates(clock)
    return {"zones": list(days), "days": list(days.values())}


def finish(
    conn: Connection,
    run_id: int,
    status: str,
    report: dict[str, Any] | None,
    error: str | None = None,
) -> None:
    """Record how run ``run_id`` ended: ``completed``, ``incomplete`` or ``failed``."""
    if status not in STATUSES[1:]:
        raise ValueError(f"run status {status!r}; expected one of {', '.join(STATUSES[1:])}")
    conn.execute(
        statement("run_finish"),
        {
            "id": run_id,
            "status": status,
            "report": None if report is None else Jsonb(report),
            "error": error,
        },
    )


def earliest_clock(conn: Connection) -> datetime | None:
    """The earliest clock of an unscoped, non-dry scheduled run, if any (run_earliest_clock.sql)."""
    row = named_row(conn.execute(statement("run_earliest_clock")))
    return None if row is None else row["clock"]


@dataclass(frozen=True, slots=True)
class PreviousJudgement:
    """What the previous run judged by, and whom it left to judge afresh (``previous_judgement``).

    ``rules``: its rules (None: no run recorded any). ``afresh``: the duties it
    set aside while it judged them afresh (migration 0022), each as
    ``(organization_id, id)``, the organisation None where the run knew the
    duty by its id alone; ``owed_at``: for each, the clock of the judgement
    it owes (an earlier run's, for a duty set aside again).
    """

    rules: str | None = None
    afresh: tuple[tuple[str | None, str], ...] = ()
    owed_at: tuple[datetime, ...] = ()


def previous_judgement(conn: Connection) -> PreviousJudgement:
    """The latest completed scheduled, unscoped, non-dry run's rules, and whom it owes afresh."""
    row = named_row(conn.execute(statement("run_previous_judgement")))
    if row is None:
        return PreviousJudgement()
    rules = None if row["rules"] is None else str(row["rules"])
    listed = row["afresh"]
    return PreviousJudgement(
        rules=rules,
        afresh=tuple((key[0], key[1]) for key in listed),
        owed_at=tuple(datetime.fromisoformat(key[2]) for key in listed),
    )


def latest_completed_clock(conn: Connection) -> datetime | None:
    """The clock of the latest completed scheduled, unscoped, non-dry run, if any."""
    row = named_row(conn.execute(statement("run_latest_completed_clock")))
    return None if row is None else row["clock"]


def latest_scheduled_clock(conn: Connection) -> datetime | None:
    """The clock of the latest non-dry scheduled run not ahead of its wall clock, if any."""
    row = named_row(conn.execute(statement("run_latest_scheduled_clock")))
    return None if row is None else row["clock"]


def record_set_aside(
    conn: Connection,
    run_id: int,
    set_aside: Sequence[tuple[str | None, str, str]],
    *,
    owed_from: datetime,
    afresh: Container[tuple[str | None, str]] = (),
    judged_at: Callable[[tuple[str | None, str]], datetime | None] = lambda key: None,
) -> None:
    """Keep what run ``run_id`` set aside, owed from clock ``owed_from``.

    ``set_aside``: ``(organization_id, duty_id, reason)`` of each, the
    organisation None where the run knew the duty by its id alone; reason
    ``refused``: a fault the run was judging afresh (migration 0025).
    ``afresh``: the ``(organization_id, duty_id)`` the run was judging
    afresh, which the next run judges afresh in turn (``previous_judgement``),
    as of ``judged_at`` of its key where that is earlier: a duty set aside
    again owes the judgement an earlier run owed it. The rest is a record for
    the operator: each duty's own account (docs/contract.md#account) is what
    makes the next run owe them.
    """
    if not set_aside:
        return
    owed = [
        min(owed_from, judged_at((organization, duty_id)) or owed_from)
        if (organization, duty_id) in afresh
        else owed_from
        for organization, duty_id, _ in set_aside
    ]
    conn.execute(
        statement("run_set_aside_record"),
        {
            "run_id": run_id,
            "owed_from": owed,
            "duty_ids": [duty_id for _, duty_id, _ in set_aside],
            "organizations": [organization for organization, _, _ in set_aside],
            "reasons": [reason for _, _, reason in set_aside],
            "afresh": [(organization, duty_id) in afresh for organization, duty_id, _ in set_aside],
        },
    )


def continued_run(conn: Connection, request: RunRequest) -> int | None:
    """The id of the run ``request`` continues, or None (not a continuation, or not found)."""
    if request.continuation == 0:
        return None
    params = {**_request_params(request), "previous": request.continuation - 1}
    row = named_row(conn.execute(statement("run_continued"), params))
    return None if row is None else int(row["id"])


def recent(
    conn: Connection, limit: int, *, mode: str | None = None, status: str | None = None
) -> list[LedgerRow]:
    """The ``limit`` most recently started runs, newest first; only of ``mode`` and ``status``
    when given (``status`` as shown: ``abandoned`` is one).

    Each row's ``duty_ids`` is a sample of the scope (``duty_ids_count`` counts them all)
    and its free text is clipped, so a list stays small; ``one`` gives a run whole.
    """
    params = {
        "limit": limit,
        "timeout": FUNCTION_TIMEOUT,
        "mode": mode,
        "status": status,
        "id_sample": LISTED_IDS,
        "text_chars": LISTED_TEXT_CHARS,
        "error_chars": LISTED_ERROR_CHARS,
    }
    with conn.cursor(row_factory=dict_row) as cursor:
        cursor.execute(statement("run_recent"), params)
        return [LedgerRow(dict(row)) for row in cursor.fetchall()]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run's whole ledger row, its report included, and the duties it set aside."""

    row: LedgerRow
    set_aside: list[dict[str, Any]]


def one(conn: Connection, run_id: int) -> RunRecord | None:
    """Run ``run_id``'s record, or None when no run has that id."""
    params = {"id": run_id, "timeout": FUNCTION_TIMEOUT}
    with conn.cursor(row_factory=dict_row) as cursor:
        found = cursor.execute(statement("run_one"), params).fetchone()
        if found is None:
            return None
        set_aside = cursor.execute(statement("run_set_aside_of"), params).fetchall()
    return RunRecord(LedgerRow(dict(found)), [dict(row) for row in set_aside])

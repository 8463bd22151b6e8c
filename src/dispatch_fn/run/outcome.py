"""How a run ended: what it counted, and what the ledger and the handler add.

``dispatch`` counts a ``RunReport``; ``dispatch_recorded`` adds the ledger's
side (its run id, how the run ended, whether it handed on, how many faults
began in it) and returns a ``RunOutcome``; the handler adds what it learnt
about the scope and the explanations of a dry run. Each stays typed until
``as_json``, at the edge: the handler's response, the CLI's JSON, the ledger
row, a failure's log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Final

from dispatch_fn.bounded import fault_listing, scope_echo
from dispatch_fn.planning import FAULT_REASONS, SKIP_REASONS, Fault, RunRequest, SkipReason
from dispatch_fn.run._settling import SetAside

# A report lists at most this many faulty (or locked) duties; the count covers them all.
FAULT_LIST_LIMIT: Final = 100
# The skip reasons a page decides, by the page's count of them (page_result.sql).
PAGE_SKIPS: Final = {
    "outside_window": SkipReason.OUTSIDE_EFFECTIVE_WINDOW,
    "nothing_due": SkipReason.NOTHING_DUE,
}


@dataclass(frozen=True, slots=True)
class RunReport:
    """The outcome of a run, as counted by the database; built once, by ``_fold``."""

    request: RunRequest
    duties_read: int = 0
    # What the page statements that committed counted, added up by name
    # (``store.PageResult.counts``): the figures below read them by name.
    counted: Mapping[str, int] = field(default_factory=dict)
    skipped: Mapping[str, int] = field(default_factory=dict)
    # Every duty the run faulted: the run keeps them all on account
    # (db.faults); the report lists the first hundred.
    faults: tuple[Fault, ...] = ()
    fault_counts: Mapping[str, int] = field(default_factory=dict)
    # Duties left without this clock's periods though their values are fine
    # (their row locked elsewhere, their statement timed out alone, their row
    # edited during a backfill into values it did not plan for): not
    # faults; their accounts stand, so the next run owes them what this one
    # did not (docs/contract.md#account). All of them: the ledger keeps every
    # id, the report lists the first hundred.
    set_aside: tuple[SetAside, ...] = ()
    # Duties whose row the server refused while the run judged them afresh:
    # faults (listed above), whose fresh judgement the ledger keeps owed
    # beside the set-aside duties' (migration 0025).
    refused_afresh: tuple[SetAside, ...] = ()
    pages: int = 0
    retries: int = 0
    complete: bool = True
    # Why an incomplete run stopped: ``deadline`` (the invocation's time) or
    # ``statement_timeouts`` (more than the run's allowance); None if complete.
    stopped_by: str | None = None
    last_duty_id: str | None = None
    # Roughly how many duties a scheduled run did not need to read, their next
    # owed day not yet come: the planner's estimate of the table's rows less
    # those read (a count would read them all). None: the run read its whole scope.
    duties_not_read: int | None = None

    @property
    def tasks_created(self) -> int:
        """Tasks the run inserted (a dry run: would insert)."""
        return self.counted.get("created", 0)

    @property
    def tasks_existing(self) -> int:
        """Tasks owed that existed already."""
        return self.counted.get("owed", 0) - self.tasks_created

    @property
    def duties_advanced(self) -> int:
        """Duties whose ``last_dispatched_period`` the run moved on."""
        return self.counted.get("advanced", 0)

    @property
    def duties_owing(self) -> int:
        """Duties whose account owed them something at this clock (docs/contract.md#account)."""
        skipped = sum(self.counted.get(count, 0) for count in PAGE_SKIPS)
        return self.counted.get("duties", 0) - skipped

    @property
    def beyond_horizon(self) -> int:
        """Duties with periods over and owed before the catch-up horizon: counted, never created."""
        return self.counted.get("lapsed", 0)

    @property
    def changed_while_owed(self) -> int:
        """Duties whose cadence, owner or state changed while periods after their account's day
        were owed: what the old one owed and the new one does not spell is not created."""
        return self.counted.get("changed", 0)

    @property
    def accounts_kept(self) -> int:
        """Duties whose account the run moved on (the same UPDATE as last_dispatched_period)."""
        return self.counted.get("kept", 0)

    @property
    def fault_total(self) -> int:
        """Every duty the run faulted, listed or not."""
        return sum(self.fault_counts.values())

    @property
    def degraded(self) -> bool:
        """Whether any duty was refused by the engine or set aside."""
        return self.fault_total > 0 or bool(self.set_aside)

    @property
    def set_aside_rows(self) -> tuple[tuple[str | None, str, str], ...]:
        """``(organization_id, duty_id, reason)`` of each duty the ledger keeps as set aside:
        every set-aside duty, then each refused while judged afresh."""
        return tuple(
            (each.organization_id, each.duty_id, str(each.reason))
            for each in (*self.set_aside, *self.refused_afresh)
        )

    @property
    def set_aside_ids(self) -> tuple[str, ...]:
        """The set-aside duties' ids, in id order."""
        return tuple(each.duty_id for each in self.set_aside)

    def as_json(self) -> dict[str, Any]:
        """The report of docs/contract.md#report, JSON-serialisable."""
        window = self.request.window
        return {
            "mode": self.request.mode,
            "now": self.request.now.isoformat(),
            "window": None
            if window is None
            else {"from": _iso(window.from_date), "to": _iso(window.to_date)},
            "dry_run": self.request.dry_run,
            # Echoes of input stay bounded: a report is a Lambda response and a log line.
            "scope": scope_echo(self.request.scope.organization_id, self.request.scope.duty_ids),
            "duties_read": self.duties_read,
            "tasks_created": self.tasks_created,
            # A dry run writes nothing: its count says so by name. tasks_created keeps the same
            # figure for the readers written before this field (docs/contract.md#report).
            "tasks_would_create": self.tasks_created if self.request.dry_run else None,
            "tasks_existing": self.tasks_existing,
            "duties_advanced": self.duties_advanced,
            "skipped": {reason: self.skipped.get(reason, 0) for reason in SKIP_REASONS},
            **fault_listing(
                [each.as_json() for each in self.faults[:FAULT_LIST_LIMIT]], self.fault_total
            ),
            "fault_counts": {reason: self.fault_counts.get(reason, 0) for reason in FAULT_REASONS},
            "degraded": self.degraded,
            "set_aside": [each.as_json() for each in self.set_aside[:FAULT_LIST_LIMIT]],
            "set_aside_count": len(self.set_aside),
            "complete": self.complete,
            "stopped_by": self.stopped_by,
            "last_duty_id": self.last_duty_id,
            "pages": self.pages,
            "retries": self.retries,
            "duties_owing": self.duties_owing,
            "beyond_horizon": self.beyond_horizon,
            "changed_while_owed": self.changed_while_owed,
            "accounts_kept": self.accounts_kept,
            "duties_not_read": self.duties_not_read,
        }


def _iso(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


@dataclass(frozen=True, slots=True)
class Ending:
    """How the ledger ended a run that finished its pages: handed on, or why not."""

    handed_off: bool = False
    hand_off_error: str | None = None
    # Why an incomplete run ends its chain here; None if complete or handed off.
    incomplete_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Remarks:
    """What is said about a run beside its report (docs/contract.md#report): ``remarks``."""

    # Whether any duty matches the scope; None for an unscoped run, or unknown.
    scope_matched: bool | None
    # Why nothing was dispatched, when no duty matches.
    scope_note: str | None
    # A dry run's explanations (``remarks._within_budget``); None for any other run.
    explained: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A run's report with what the ledger and the handler add to it.

    ``ending`` is None for a run that failed before the ledger ended it,
    ``remarks`` None until they are made (``remarks.remarks_on``), and
    ``duration_ms`` None until the handler has timed the invocation. ``new_faults`` counts
    the duties whose fault began in this run (db.faults); None where the run
    kept no account of its faults: a dry run, or one that failed.
    """

    report: RunReport
    run_id: int | None = None
    ending: Ending | None = None
    remarks: Remarks | None = None
    new_faults: int | None = None
    duration_ms: int | None = None

    @property
    def handed_off(self) -> bool:
        """Whether a continuation was sent for the rest of the run."""
        return self.ending is not None and self.ending.handed_off

    @property
    def ended_incomplete(self) -> bool:
        """Whether the run ends its chain incomplete: not a run that handed its rest on."""
        return not self.report.complete and not self.handed_off

    def as_json(self) -> dict[str, Any]:
        """The report of docs/contract.md#invocation with the ledger's fields, JSON-serialisable."""
        result = {**self.report.as_json(), "run_id": self.run_id}
        if self.ending is not None:
            request = self.report.request
            result |= {
                "continuation": request.continuation,
                "resume_after": request.resume_after,
                "handed_off": self.ending.handed_off,
                "hand_off_error": self.ending.hand_off_error,
                "incomplete_reason": self.ending.incomplete_reason,
            }
        if self.remarks is not None:
            result |= {
                "scope_matched": self.remarks.scope_matched,
                "scope_note": self.remarks.scope_note,
            }
            if self.remarks.explained is not None:
                result |= self.remarks.explained
        if self.duration_ms is not None:
            result["duration_ms"] = self.duration_ms
        return result


def unreported(run_id: int | None) -> dict[str, Any]:
    """What is known of a run that ended before it had a report: it is not complete."""
    return {"complete": False, "run_id": run_id}

"""How a run ended, as the ledger recorded it: the one value the handler serialises.

``dispatch.run`` counts a ``RunReport``; ``recorded.execute`` adds the ledger's
side (its run id, how the run ended, whether it handed on) and returns a
``RunOutcome``; the handler adds what it learnt about the scope and the
explanations of a dry run. Each stays typed until ``as_json``, at the edge:
the handler's response, the CLI's JSON, the ledger row, a failure's log line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch_fn.run.dispatch import RunReport


@dataclass(frozen=True, slots=True)
class Ending:
    """How the ledger ended a run that finished its pages: handed on, or why not."""

    handed_off: bool = False
    hand_off_error: str | None = None
    # Why an incomplete run ends its chain here; None if complete or handed off.
    incomplete_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Remarks:
    """What the handler says about a run beside its report (docs/contract.md#invocation)."""

    # Whether any duty matches the scope; None for an unscoped run, or unknown.
    scope_matched: bool | None
    # Why nothing was dispatched, when no duty matches.
    scope_note: str | None
    # A dry run's explanations (``invocation._within_budget``); None for any other run.
    explained: dict[str, Any] | None
    duration_ms: int


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A run's report with what the ledger and the handler add to it.

    ``ending`` is None for a run that failed before the ledger ended it, and
    ``remarks`` None until the handler has made them.
    """

    report: RunReport
    run_id: int | None = None
    ending: Ending | None = None
    remarks: Remarks | None = None

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
            result["duration_ms"] = self.remarks.duration_ms
        return result


def unreported(run_id: int | None) -> dict[str, Any]:
    """What is known of a run that ended before it had a report: it is not complete."""
    return {"complete": False, "run_id": run_id}


class RunFailedError(RuntimeError):
    """A run stopped on an unexpected error; ``outcome`` says how far it got.

    The message carries that report too, so Lambda's on-failure destination
    (which records only the error's type and message) tells an operator which
    pages were committed before the failure.
    """

    def __init__(self, message: str, outcome: RunOutcome | None) -> None:
        super().__init__(message)
        # None: the run failed before it had a report (its ledger was unreachable).
        self.outcome = outcome

    @property
    def report(self) -> dict[str, Any]:
        """The outcome as JSON, as the failure's log line and ledger row say it."""
        if self.outcome is None:
            return unreported(None)
        return self.outcome.as_json()

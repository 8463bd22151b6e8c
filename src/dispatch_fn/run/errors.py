"""The run layer's exception: a run that failed, with how far it got.

Every other exception the dispatcher raises on purpose is in ``dispatch_fn.errors``;
this one carries a run's outcome, so it lives here, in the layer that knows
outcomes (docs/contract.md#errors).
"""

from __future__ import annotations

from typing import Any

from dispatch_fn.run.outcome import RunOutcome, unreported


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

"""What one run is asked to do: its clock, window, scope and whether to write.

The event parser builds a ``RunRequest`` and the run loop, the ledger and the
hand-off read the same value; nothing here talks to a database, so the parser
imports it without the run loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from dispatch_fn.planning.plan import SCHEDULE_INTERVAL, Window

# The ledger's words (db.ledger): here, so that parsing an event names them
# without loading the database driver.
STATUSES: Final = ("running", "completed", "incomplete", "failed")
# What ``runs`` shows: a run still running past the function's timeout is abandoned.
SHOWN_STATUSES: Final = (*STATUSES, "abandoned")
MODES: Final = ("scheduled", "backfill")


@dataclass(frozen=True, slots=True)
class Afresh:
    """Whose accounts a run judges afresh (plan.Account.rejudged): every one it reads, or these.

    ``every``: the rules changed since the previous run (docs/contract.md#account).
    ``keys``: ``(organization_id, duty_id)`` of each duty the previous run
    set aside while it judged it afresh, the organisation None for a duty
    known by its id alone, which stands for every duty of the id; ``clocks``:
    for each, the clock of the judgement it owes (plan.account_judged).
    """

    every: bool = False
    keys: tuple[tuple[str | None, str], ...] = ()
    clocks: tuple[datetime, ...] = ()

    def __post_init__(self) -> None:
        if len(self.clocks) != len(self.keys):
            raise ValueError(
                f"{len(self.clocks)} clocks for {len(self.keys)} keys; expected one each"
            )

    def __contains__(self, key: object) -> bool:
        """Whether the duty ``(organization_id, duty_id)`` is judged afresh."""
        return self.every or self.owed_at(key) is not None

    def owed_at(self, key: object) -> datetime | None:
        """The clock of the judgement the previous run owes the duty ``key`` (None: none)."""
        if not isinstance(key, tuple) or len(key) != 2:
            return None
        organization, duty_id = key
        owed = [
            clock
            for (listed, listed_id), clock in zip(self.keys, self.clocks, strict=True)
            if listed_id == duty_id and (listed is None or organization in (None, listed))
        ]
        return min(owed, default=None)


@dataclass(frozen=True, slots=True)
class Scope:
    """Limits a run to one organisation and/or a list of duties (``store.scope_params``)."""

    organization_id: str | None = None
    duty_ids: tuple[str, ...] | None = None
    # A continuation's resume point (docs/contract.md#continuation): only duties whose id sorts
    # after it.
    resume_after: str | None = None
    # A scheduled run's reading (docs/contract.md#account): only the duties
    # whose next owed day has begun in their zone by this instant
    # (``dispatch_next_at``). None: every duty in the scope.
    owed_at: datetime | None = None
    # What a run stopped by its deadline reached (its gapless mark): only the
    # duties whose id sorts at or before it, so that its report counts those
    # alone and the continuation the rest. None: no bound.
    reach: str | None = None
    # Whose accounts the run judges afresh (docs/contract.md#account): a
    # scheduled run reads those listed whatever their next owed day.
    afresh: Afresh = Afresh()

    @property
    def named(self) -> bool:
        """Whether the run is limited to an organisation or to listed duties."""
        return self.organization_id is not None or self.duty_ids is not None


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What one invocation asks for: its clock, window, scope and whether to write."""

    now: datetime
    window: Window | None = None
    dry_run: bool = False
    scope: Scope = field(default_factory=Scope)
    # How many times the run has been handed on before (docs/contract.md#ledger); 0 for a first run.
    continuation: int = 0
    # The time since the previous scheduled clock (docs/contract.md#account).
    interval: timedelta = SCHEDULE_INTERVAL

    @property
    def mode(self) -> str:
        """``scheduled`` or ``backfill``."""
        return "scheduled" if self.window is None else "backfill"

    @property
    def resume_after(self) -> str | None:
        """The id a continuation resumes after; part of the scope, so every statement obeys it."""
        return self.scope.resume_after

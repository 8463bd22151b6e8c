"""What one run depends on, built once where it starts and passed down whole.

The Lambda shim and the CLI build a ``Runtime`` (``invocation.runtime_for``):
where connections come from, how much time the run has, how it hands the rest
on, who hears of its progress, and its tuning. ``invocation.handle``,
``dispatch_recorded`` and ``dispatch`` take it as it is; a test or a bench
run builds its own. A new knob is a field of ``settings.Tuning``; a new
dependency, a field here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from dispatch_fn.db import Connection, PageResult, dispatch_page
from dispatch_fn.run import _rules
from dispatch_fn.run.progress import Progress
from dispatch_fn.settings import Tuning

type Clock = Callable[[], datetime]
# Sends a continuation's event (docs/contract.md#ledger); raises ``errors.HandOffError`` if
# refused.
type HandOff = Callable[[dict[str, Any]], None]
# Writes one page and returns its result, called with ``db.dispatch_page``'s arguments.
type PageWriter = Callable[..., PageResult]


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a run must end, as its page statements see it.

    ``time_left_ms`` is what remains before the run must stop (its reserve for
    the report already taken off); ``statement_timeout_ms`` is the sessions'
    own statement_timeout. A statement starts with the smaller of the two.
    """

    time_left_ms: Callable[[], float]
    statement_timeout_ms: int

    def limit_ms(self) -> int | None:
        """What the next statement may take, when the deadline comes before the timeout."""
        left = self.time_left_ms()
        return int(left) if left < self.statement_timeout_ms else None


class ConnectionSource(Protocol):
    """Where a run's connections come from, the ones that replace a dead one included."""

    def get(self) -> list[Connection]:
        """Up to ``Tuning.workers`` autocommit connections, at least one."""
        ...

    def reconnect(self) -> Connection:
        """A fresh autocommit connection, in place of one that died mid-run (the run closes it)."""
        ...

    def discard(self) -> None:
        """Forget the connections, which a failed run may have left unusable."""
        ...


class TimeBudget(Protocol):
    """How long the run may go on: one clock, read two ways."""

    def should_stop(self) -> bool:
        """Whether the run should start no further page; asked before each."""
        ...

    def deadline(self) -> Deadline | None:
        """How a statement already running is bounded by the same clock; None: by its timeout."""
        ...


@dataclass(frozen=True, slots=True)
class Unlimited:
    """The budget of a run with all the time it needs (the CLI's, a test's)."""

    def should_stop(self) -> bool:
        """Never."""
        return False

    def deadline(self) -> Deadline | None:
        """None: statements are bounded by their session's statement_timeout alone."""
        return None


UNLIMITED: Final = Unlimited()


def _wall_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Runtime:
    """The dependencies of one run, fixed before it starts."""

    tuning: Tuning = field(default_factory=Tuning)
    budget: TimeBudget = UNLIMITED
    # None: the caller holds the run's connections, and one that dies is not replaced.
    connections: ConnectionSource | None = None
    # None: a run stopped by its deadline ends incomplete (a local run).
    hand_off: HandOff | None = None
    # Told how far the run has got after each step that dispatched duties.
    on_progress: Callable[[Progress], None] | None = None
    # The clock of an event that names none.
    clock: Clock = _wall_clock
    # The invocation's id, kept in the ledger row.
    request_id: str | None = None
    # The rules the run judges with, as the ledger records them (rules.current):
    # a test or a replay passes others to stand for a new tzdata or holidays
    # release without swapping the module's own.
    rules: Callable[[], str] = _rules.current
    # Writes each page (db.dispatch_page): a test passes a wrapper to choose
    # the page's statement or to see each page's result, without swapping the
    # module's own.
    dispatch_page: PageWriter = dispatch_page


# A run with no deadline, no hand-off and the default tuning: the bench's, a test's.
LOCAL: Final = Runtime()

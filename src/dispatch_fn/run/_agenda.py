"""What a run has still to do, and what follows each step's outcome: the scheduler's rules.

Pure: the scheduler (``dispatch._walk``) hands ``Board.take``'s jobs to idle
connections and tells the board every outcome; the board decides a range's
next page, a locked page's second try, a lost page's redo on another
connection, and when the run stops taking pages.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from dispatch_fn.planning import page_plan
from dispatch_fn.run._settling import Failure, Job, Outcome

# Why an incomplete run stopped (RunReport.stopped_by): only the first may hand off.
STOPPED_BY_DEADLINE: Final = "deadline"
STOPPED_BY_TIMEOUTS: Final = "statement_timeouts"
# Connections a page is tried on when each dies under it, and fresh connections
# a run opens in all: a server that keeps dropping them fails the run instead
# of being reconnected to forever.
CONNECTION_ATTEMPTS: Final = 3
# Outcomes whose duties up to ``reached`` are dispatched or set aside: a step
# that finished, or one stopped by a timeout past the run's allowance or by
# the run's deadline (up to where it settled).
SETTLED: Final = (None, Failure.TIMEOUTS, Failure.DEADLINE)


@dataclass(frozen=True, slots=True)
class Decision:
    """What follows one outcome: a step to queue (now, or once the rest is done), or failure."""

    follow_up: Job | None = None
    later: bool = False
    fatal: bool = False
    # Take no more pages, and why: the run's deadline came, or its timeouts ran out.
    stop: str | None = None


def decide(outcome: Outcome) -> Decision:
    """What follows ``outcome``."""
    job = outcome.job
    match outcome.failure:
        case None if outcome.more:
            # The range's next page first, so the gapless mark moves on.
            return Decision(Job(job.range_no, outcome.reached, job.upto))
        case None:
            return Decision()
        case Failure.DEADLINE | Failure.TIMEOUTS:
            # Put back from as far as it settled (a cancelled page: where it
            # began): the mark stays there, the next run takes the rest.
            why = (
                STOPPED_BY_DEADLINE if outcome.failure is Failure.DEADLINE else STOPPED_BY_TIMEOUTS
            )
            return Decision(replace(job, after=outcome.reached), stop=why)
        case Failure.LOCKED:
            return Decision(replace(job, deferred=job.deferred + 1), later=True)
        case Failure.LOST if job.lost + 1 < CONNECTION_ATTEMPTS:
            return Decision(replace(job, lost=job.lost + 1))
        case _:
            return Decision(fatal=True)


class Agenda:
    """The steps not yet taken, in the order to take them."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self._fresh = deque(jobs)
        self._later: deque[Job] = deque()  # locked once: tried when the rest is done

    def __bool__(self) -> bool:
        return bool(self._fresh or self._later)

    def take(self) -> Job:
        return self._fresh.popleft() if self._fresh else self._later.popleft()

    def add(self, decided: Decision) -> None:
        if decided.follow_up is None:
            return
        if decided.later:
            self._later.append(decided.follow_up)
        else:
            self._fresh.appendleft(decided.follow_up)

    def left(self) -> list[Job]:
        return [*self._fresh, *self._later]


class Board:
    """What the scheduler knows between steps; used by its thread only.

    ``created`` and ``existing`` are the run's tasks so far, for the progress
    meter: what a step committed counts even if it failed later. ``probe``
    is whether the next page handed out probes for its owed rows first: at
    the start, ``probe`` as given (``page_plan.probes_from_the_start``), then
    what the last page that owed rows found (``page_plan.rows_mostly_present``).
    """

    def __init__(
        self, ranges: Sequence[tuple[str | None, str | None]], *, probe: bool = False
    ) -> None:
        self.agenda = Agenda(Job(n, lower, upper) for n, (lower, upper) in enumerate(ranges))
        self.probe = probe
        self.outcomes: list[Outcome] = []
        self.fatal: list[Outcome] = []
        self.lost: list[Outcome] = []
        self.stopped_by: str | None = None
        self.created = self.existing = 0

    def open(self) -> bool:
        """Whether a job is to be handed out: some are left and the run has not stopped."""
        return bool(self.agenda) and not (self.stopped_by or self.fatal)

    def wants_connections(self) -> bool:
        """Whether a connection lost is worth replacing."""
        return bool(self.agenda) and not self.fatal

    def take(self) -> Job:
        """The next job, with the board's guess whether its page probes first."""
        return replace(self.agenda.take(), probe=self.probe)

    def stop(self, why: str) -> None:
        self.stopped_by = self.stopped_by or why

    def record(self, outcome: Outcome) -> bool:
        """Take in one outcome and queue what follows; False if its connection died."""
        self.outcomes.append(outcome)
        paged = sum(page.created for page in outcome.pages)
        owed = sum(page.owed for page in outcome.pages)
        if owed:
            self.probe = page_plan.rows_mostly_present(owed, paged)
        self.created += paged
        self.existing += sum(page.owed for page in outcome.pages) - paged
        decided = decide(outcome)
        self.agenda.add(decided)
        if decided.stop is not None:
            self.stop(decided.stop)
        if decided.fatal:
            self.fatal.append(outcome)
        if outcome.failure is Failure.LOST:
            self.lost.append(outcome)
            return False
        return True

    def finish(self, *, connections_left: bool) -> None:
        """The run took its last step: with work left and every connection dead, it fails."""
        if self.agenda and not connections_left and not self.fatal and self.lost:
            self.fatal.append(self.lost[-1])

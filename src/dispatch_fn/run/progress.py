"""How far a run has got, page by page: what ``dispatch.run`` reports to ``on_progress``.

The run loop folds each committed page into a ``ProgressMeter``, which hands a
``Progress`` snapshot to the caller's callback: the handler logs it as one
structured line, the CLI draws a progress bar from it. Nothing here does I/O
or reads the clock by itself; the clock is passed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Seconds on a monotonic clock (run.Clock is the run's wall clock, a datetime).
type Stopwatch = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Progress:
    """One snapshot of a run: duties done of total, tasks so far, time spent and left."""

    duties_done: int
    duties_total: int
    tasks_created: int
    tasks_existing: int
    pages: int
    elapsed_s: float

    @property
    def remaining_s(self) -> float | None:
        """Seconds left at the pace so far; None before the first duty is done."""
        if self.duties_done == 0:
            return None
        left = max(self.duties_total - self.duties_done, 0)
        return self.elapsed_s / self.duties_done * left

    @property
    def finished(self) -> bool:
        """Whether every duty counted at the start has been done."""
        return self.duties_done >= self.duties_total

    def as_log(self) -> dict[str, Any]:
        """The snapshot as the fields of one structured log line."""
        remaining = self.remaining_s
        return {
            "duties_done": self.duties_done,
            "duties_total": self.duties_total,
            "percent": round(100 * self.duties_done / self.duties_total, 1)
            if self.duties_total
            else 100.0,
            "tasks_created": self.tasks_created,
            "tasks_existing": self.tasks_existing,
            "pages": self.pages,
            "elapsed_s": round(self.elapsed_s, 1),
            "remaining_s": None if remaining is None else round(remaining, 1),
        }


class ProgressMeter:
    """Folds page results into ``Progress`` snapshots for one callback.

    ``total`` is the count of dispatchable duties the run planned for; duties
    added while it runs can take ``duties_done`` past it, so the snapshot
    never shows more than ``total``. Callers serialise their calls to ``page``.
    """

    def __init__(
        self,
        total: int,
        on_progress: Callable[[Progress], None] | None,
        clock: Stopwatch = time.monotonic,
    ) -> None:
        self._total = total
        self._on_progress = on_progress
        self._clock = clock
        self._started = clock()
        self._done = 0
        self._pages = 0

    def page(self, duties: int, tasks_created: int, tasks_existing: int) -> None:
        """Note a committed page of ``duties``; the task counts are the run's totals so far.

        A page that dispatched no duty (the empty one that ends a keyset walk,
        or one of faulty duties only) moved nothing forward and is not reported.
        """
        if self._on_progress is None or duties == 0:
            return
        self._done += duties
        self._pages += 1
        self._on_progress(
            Progress(
                duties_done=min(self._done, self._total),
                duties_total=self._total,
                tasks_created=tasks_created,
                tasks_existing=tasks_existing,
                pages=self._pages,
                elapsed_s=self._clock() - self._started,
            )
        )


def throttled(
    report: Callable[[Progress], None], every_s: float, clock: Stopwatch = time.monotonic
) -> Callable[[Progress], None]:
    """``report`` at most once per ``every_s`` seconds, and always for the last page.

    The first page is reported at once, so a slow run says early what it is doing.
    """
    last: float | None = None

    def maybe_report(progress: Progress) -> None:
        nonlocal last
        now = clock()
        if last is None or now - last >= every_s or progress.finished:
            last = now
            report(progress)

    return maybe_report

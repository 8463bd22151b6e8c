"""A run's runtime for a test: the defaults, and what the test changes.

``runtime(chunk_size=7, should_stop=...)`` instead of threading each
dependency through ``dispatch.run`` or ``recorded.execute`` by hand; the
tuning's fields (``settings.Tuning``) are keyword arguments too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dispatch_fn.db import Connection
from dispatch_fn.run import UNLIMITED, Deadline, HandOff, Progress, Runtime, TimeBudget
from dispatch_fn.settings import Tuning


def runtime(
    *,
    should_stop: Callable[[], bool] | None = None,
    deadline: Deadline | None = None,
    reconnect: Callable[[], Connection] | None = None,
    hand_off: HandOff | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    **tuning: Any,
) -> Runtime:
    """A runtime whose budget asks ``should_stop`` and bounds pages by ``deadline``."""
    budget: TimeBudget = UNLIMITED
    if should_stop is not None or deadline is not None:
        budget = Scripted(should_stop or (lambda: False), deadline)
    return Runtime(
        tuning=replace(Tuning(), **tuning),
        budget=budget,
        connections=None if reconnect is None else Reconnecting(reconnect),
        hand_off=hand_off,
        on_progress=on_progress,
    )


@dataclass(frozen=True, slots=True)
class Scripted:
    """A time budget that answers what the test says."""

    stop: Callable[[], bool]
    limit: Deadline | None = None

    def should_stop(self) -> bool:
        return self.stop()

    def deadline(self) -> Deadline | None:
        return self.limit


@dataclass(frozen=True, slots=True)
class Reconnecting:
    """A test's connection source: the test holds the run's connections; this opens more."""

    open: Callable[[], Connection]

    def get(self) -> list[Connection]:
        raise NotImplementedError("a test passes the run its connections itself")

    def reconnect(self) -> Connection:
        return self.open()

    def discard(self) -> None:
        return

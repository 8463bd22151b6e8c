"""The time budgets a dispatcher child's run stops by.

``Asked``: a run with all the time it needs, asked before each page whether
to stop (a test pauses there, or stops the run). ``SimulatedInvocation``: a
Lambda invocation's clock, as the handler's budget reads it from the
context, for the links of a chain (``bench.dispatch.chain``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from dispatch_fn.run import Deadline


@dataclass(frozen=True, slots=True)
class Asked:
    """A budget that only answers whether to stop, before each page (it may pause first)."""

    stop: Callable[[], bool]

    def should_stop(self) -> bool:
        return self.stop()

    def deadline(self) -> Deadline | None:
        return None


class SimulatedInvocation:
    """A Lambda invocation's clock, as the handler's budget reads it from the context.

    Started when the run starts; ``should_stop`` says yes once less than the
    reserve is left (after the optional pause before each page), and
    ``deadline`` bounds a page already running by the time left, so a page
    never outlasts the invocation.
    """

    def __init__(
        self, budget_ms: int, reserve_ms: int, statement_timeout_ms: int, pause_s: float
    ) -> None:
        self._ends = time.monotonic() + budget_ms / 1000
        self._reserve_ms = reserve_ms
        self._statement_timeout_ms = statement_timeout_ms
        self._pause_s = pause_s

    def time_left_ms(self) -> float:
        """What is left before the run must stop, its reserve taken off."""
        return (self._ends - time.monotonic()) * 1000 - self._reserve_ms

    def should_stop(self) -> bool:
        """Whether the run must take no more pages."""
        if self._pause_s > 0:
            time.sleep(self._pause_s)
        return self.time_left_ms() < 0

    def deadline(self) -> Deadline | None:
        """The same clock, as the page statements see it."""
        return Deadline(self.time_left_ms, self._statement_timeout_ms)

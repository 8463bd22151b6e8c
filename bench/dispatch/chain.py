"""A run as a chain of simulated Lambda invocations, each handing the rest on to the next.

Each link is a child process running ``run.dispatch_recorded`` with an invocation's
deadline (``ChildSpec.budget_ms``): the run stops taking pages when less than
the reserve is left, records itself incomplete, and hands the continuation's
event (``resume_after``, the next ``continuation`` number) to a callable that
keeps it. The parent starts the next link with that event, as Lambda would
start the asynchronous invocation, until a link completes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from bench.dispatch.child import ChildSpec
from bench.dispatch.dispatcher import ChildRun, run_child
from bench.dispatch.server import BenchError, Conn
from dispatch_fn.run.continuation import MAX_CONTINUATIONS
from dispatch_fn.settings import Settings

LAMBDA_TIMEOUT_MS: Final = 900_000
# The function's own reserve (DISPATCH_RESERVE_MS) unless told otherwise.
_SETTING_DEFAULTS: Final[dict[str, Any]] = {f.name: f.default for f in dataclasses.fields(Settings)}
DEFAULT_RESERVE_MS: Final[int] = _SETTING_DEFAULTS["reserve_ms"]


@dataclass(frozen=True, slots=True)
class ChainRun:
    """Every link of one chain, in order, and their sums."""

    links: tuple[ChildRun, ...]
    budget_ms: int
    reserve_ms: int

    @property
    def seconds(self) -> float:
        """Wall time of the links together (the gaps between invocations left out)."""
        return sum(link.seconds for link in self.links)

    @property
    def server_cpu_seconds(self) -> float | None:
        """The server CPU of every link, or None where it could not be read."""
        spent = [link.server_cpu_seconds for link in self.links]
        return None if any(each is None for each in spent) else sum(e or 0.0 for e in spent)

    @property
    def round_trips(self) -> int:
        """Round trips of every link together."""
        return sum(link.round_trips for link in self.links)

    @property
    def rss_peak_mib(self) -> float:
        """The largest peak RSS of any link (each is a process of its own)."""
        return max(link.rss_peak_mib for link in self.links)

    @property
    def tasks_created(self) -> int:
        """Tasks the whole chain created."""
        return sum(link.tasks_created for link in self.links)

    @property
    def duties_advanced(self) -> int:
        """Duties the whole chain advanced."""
        return sum(link.duties_advanced for link in self.links)

    @property
    def pages(self) -> int:
        """Pages of every link together."""
        return sum(link.pages for link in self.links)

    @property
    def complete(self) -> bool:
        """Whether the last link completed the run."""
        return bool(self.links[-1].report["complete"])


def run_chain(
    conn: Conn,
    spec: ChildSpec,
    budget_ms: int = LAMBDA_TIMEOUT_MS,
    reserve_ms: int = DEFAULT_RESERVE_MS,
) -> ChainRun:
    """Run ``spec`` as a chain of invocations of ``budget_ms`` each, until one completes.

    Raises ``BenchError`` when a link ends incomplete without handing off, or
    the chain would pass the dispatcher's own bound on continuations.
    """
    link_spec = dataclasses.replace(spec, budget_ms=budget_ms, reserve_ms=reserve_ms)
    links: list[ChildRun] = []
    while True:
        link = run_child(conn, link_spec)
        links.append(link)
        report = link.report
        if report["complete"]:
            return ChainRun(tuple(links), budget_ms, reserve_ms)
        event = report.get("handed_off_event")
        if not report["handed_off"] or event is None:
            raise BenchError(
                f"link {len(links)} of the chain ended incomplete without handing off: "
                f"{report.get('incomplete_reason')!r}"
            )
        if len(links) > MAX_CONTINUATIONS:
            raise BenchError(f"the chain passed {MAX_CONTINUATIONS} continuations")
        link_spec = dataclasses.replace(
            link_spec, resume_after=event["resume_after"], continuation=event["continuation"]
        )

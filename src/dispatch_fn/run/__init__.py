"""One run: its pages, its ledger row and hand-off, what it says beside its report, explain.

``dispatch`` runs the pages of one request and counts a ``RunReport``;
``dispatch_recorded`` wraps it in the ledger (a row before the first page and
after the last, the set-aside duties, the fault account) and hands on what a
deadline stopped; ``dispatch_remarked``, what an invocation runs, adds the
remarks (the scope's match, a dry run's explanations). ``explain`` answers
why a duty got, or did not get, a task. ``continuation`` is the hand-off's
namespace. The settling machine, the scheduler and the step driver behind
``dispatch`` are private (``_settling``, ``_agenda``, ``_pages``).

The face loads a module when one of its names is first used, not on import
(as ``concurrent.futures`` does): the settling machine stays free of the
database driver, and a handler that only parses loads no run loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch_fn.faces import lazy_face

if TYPE_CHECKING:
    from dispatch_fn.run import continuation
    from dispatch_fn.run._agenda import (
        CONNECTION_ATTEMPTS,
        STOPPED_BY_DEADLINE,
        STOPPED_BY_TIMEOUTS,
    )
    from dispatch_fn.run._dispatch import dispatch
    from dispatch_fn.run._explain import (
        EXPLAIN_BYTES,
        MAX_EXPLAINED,
        explain,
        explain_each,
        render_explanation,
    )
    from dispatch_fn.run.errors import RunFailedError
    from dispatch_fn.run.outcome import FAULT_LIST_LIMIT, Ending, Remarks, RunOutcome, RunReport
    from dispatch_fn.run.progress import Progress, ProgressMeter, throttled
    from dispatch_fn.run.recorded import dispatch_recorded
    from dispatch_fn.run.remarks import dispatch_remarked, remarks_on
    from dispatch_fn.run.runtime import (
        LOCAL,
        UNLIMITED,
        Clock,
        ConnectionSource,
        Deadline,
        HandOff,
        Runtime,
        TimeBudget,
    )

__all__ = [
    "CONNECTION_ATTEMPTS",
    "EXPLAIN_BYTES",
    "FAULT_LIST_LIMIT",
    "LOCAL",
    "MAX_EXPLAINED",
    "STOPPED_BY_DEADLINE",
    "STOPPED_BY_TIMEOUTS",
    "UNLIMITED",
    "Clock",
    "ConnectionSource",
    "Deadline",
    "Ending",
    "HandOff",
    "Progress",
    "ProgressMeter",
    "Remarks",
    "RunFailedError",
    "RunOutcome",
    "RunReport",
    "Runtime",
    "TimeBudget",
    "continuation",
    "dispatch",
    "dispatch_recorded",
    "dispatch_remarked",
    "explain",
    "explain_each",
    "remarks_on",
    "render_explanation",
    "throttled",
]

# Where each name of the face is defined: the module that loads on its first use
# (None: the name is a namespace, the module itself).
_HOME = {
    **dict.fromkeys(("continuation",), None),
    **dict.fromkeys(
        ("CONNECTION_ATTEMPTS", "STOPPED_BY_DEADLINE", "STOPPED_BY_TIMEOUTS"), "_agenda"
    ),
    **dict.fromkeys(("dispatch",), "_dispatch"),
    **dict.fromkeys(
        ("EXPLAIN_BYTES", "MAX_EXPLAINED", "explain", "explain_each", "render_explanation"),
        "_explain",
    ),
    **dict.fromkeys(("RunFailedError",), "errors"),
    **dict.fromkeys(
        ("Ending", "FAULT_LIST_LIMIT", "Remarks", "RunOutcome", "RunReport"), "outcome"
    ),
    **dict.fromkeys(("Progress", "ProgressMeter", "throttled"), "progress"),
    **dict.fromkeys(("dispatch_recorded",), "recorded"),
    **dict.fromkeys(("dispatch_remarked", "remarks_on"), "remarks"),
    **dict.fromkeys(
        (
            "Clock",
            "ConnectionSource",
            "Deadline",
            "HandOff",
            "LOCAL",
            "Runtime",
            "TimeBudget",
            "UNLIMITED",
        ),
        "runtime",
    ),
}

if not TYPE_CHECKING:  # the type checker reads the imports above instead
    __getattr__, __dir__ = lazy_face(__name__, _HOME)

"""The rules a run judges with: the tz release, the holidays release, the owed rules' version.

Each of them moves what a duty owes, or when, without touching its row
(docs/contract.md#account). The ledger records them with every run, and a run
whose rules differ from the previous completed run's judges every account
afresh; one whose rules are the same judges afresh the duties that run set
aside while it judged them afresh (migration 0022).
"""

from __future__ import annotations

import functools
from importlib.metadata import version

from dispatch_fn.db import ledger
from dispatch_fn.planning import OWED_RULES, Afresh


@functools.cache
def current() -> str:
    """This build's rules, as the ledger records them."""
    return f"tzdata {version('tzdata')}; holidays {version('holidays')}; owed {OWED_RULES}"


def _changed(previous: str | None, judged_by: str) -> bool:
    """Whether ``judged_by`` differs from the previous run's rules (None: none recorded).

    A run, and an explanation of one, then judges every account it reads afresh.
    """
    return previous is not None and previous != judged_by


def afresh(previous: ledger.PreviousJudgement, judged_by: str) -> Afresh:
    """Whom a run judging by ``judged_by`` judges afresh, after the ``previous`` run.

    A duty the previous run set aside while it judged it afresh was never
    judged so: it still is owed that, as of that run's clock, new rules or
    not, and a run that sets it aside again records it so in turn.
    """
    return Afresh(
        every=_changed(previous.rules, judged_by), keys=previous.afresh, clocks=previous.owed_at
    )

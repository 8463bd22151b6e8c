"""The rules a run judges with: the tz release, the holidays release, the owed rules' version.

Each of them moves what a duty owes, or when, without touching its row
(docs/contract.md#account). The ledger records them with every run, and a run
whose rules differ from the previous completed run's judges every account
afresh; one whose rules are the same judges afresh the duties that run set
aside while it judged them afresh (migration 0022).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import version
from typing import Final

from dispatch_fn.db import ledger
from dispatch_fn.planning import OWED_RULES


@functools.cache
def current() -> str:
    """This build's rules, as the ledger records them."""
    return f"tzdata {version('tzdata')}; holidays {version('holidays')}; owed {OWED_RULES}"


def _changed(previous: str | None, judged_by: str) -> bool:
    """Whether ``judged_by`` differs from the previous run's rules (None: none recorded).

    A run, and an explanation of one, then judges every account it reads afresh.
    """
    return previous is not None and previous != judged_by


@dataclass(frozen=True, slots=True)
class Afresh:
    """Whose accounts a run judges afresh (plan.Account.rejudged): every one it reads, or these.

    ``keys``: ``(organization_id, duty_id)`` of each, the organisation None
    for a duty known by its id alone, which stands for every duty of the id.
    """

    every: bool = False
    keys: tuple[tuple[str | None, str], ...] = ()

    def __contains__(self, key: object) -> bool:
        """Whether the duty ``(organization_id, duty_id)`` is judged afresh."""
        if self.every:
            return True
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        organization, duty_id = key
        return any(
            listed_id == duty_id and (listed is None or organization in (None, listed))
            for listed, listed_id in self.keys
        )


# A run whose rules and previous run leave no account to judge afresh.
NOBODY_AFRESH: Final = Afresh()


def afresh(previous: ledger.PreviousJudgement, judged_by: str) -> Afresh:
    """Whom a run judging by ``judged_by`` judges afresh, after the ``previous`` run.

    A duty the previous run set aside while it judged it afresh was never
    judged so: it still is owed that, and a run that sets it aside again
    records it so in turn.
    """
    if _changed(previous.rules, judged_by):
        return Afresh(every=True)
    return Afresh(keys=previous.afresh)

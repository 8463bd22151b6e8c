"""The rules a run judges with: the tz release, the holidays release, the owed rules' version.

Each of them moves what a duty owes, or when, without touching its row
(docs/contract.md#account). The ledger records them with every run, and a run
whose rules differ from the previous completed run's judges every account
afresh.
"""

from __future__ import annotations

import functools
from importlib.metadata import version

from dispatch_fn.planning import OWED_RULES


@functools.cache
def current() -> str:
    """This build's rules, as the ledger records them."""
    return f"tzdata {version('tzdata')}; holidays {version('holidays')}; owed {OWED_RULES}"


def changed(previous: str | None, judged_by: str) -> bool:
    """Whether ``judged_by`` differs from the previous run's rules (None: none recorded).

    A run, and an explanation of one, then judges every account it reads afresh.
    """
    return previous is not None and previous != judged_by

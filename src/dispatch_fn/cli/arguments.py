"""The command line's parser and the types of its flags: each refusal names the flag.

A bad flag is refused before anything runs, with exit status 2 and one line
on stderr naming the flag and what it expects (docs/contract.md#exit-statuses),
never the internal class that would have refused the value later.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import date, datetime
from typing import Final, NoReturn

from dispatch_fn.aws import day_of, instant_of
from dispatch_fn.cli import exit_status
from dispatch_fn.cli.exit_status import ExitStatus

# PostgreSQL's bigint: the ledger's ids, and the most a LIMIT takes.
MAX_BIGINT: Final = 2**63 - 1


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose refusals are one ``error:`` line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        exit_status.say(sys.stderr, "refused", f"{self.prog}: {message} (see --help)")
        raise SystemExit(ExitStatus.REFUSED)


def whole_number(maximum: int) -> Callable[[str], int]:
    """A flag's type: a whole number from 1 to ``maximum``."""
    expected = f"expected a whole number from 1 to {maximum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}; {expected}") from None
        if not 1 <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{text!r}; {expected}")
        return value

    return parse


def instant(text: str) -> datetime:
    """A flag's type: an ISO 8601 instant with its UTC offset, as an event's ``now``."""
    try:
        return instant_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def day(text: str) -> date:
    """A flag's type: a ``YYYY-MM-DD`` day, as an event's ``from`` and ``to``."""
    try:
        return day_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

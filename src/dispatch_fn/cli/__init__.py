"""``python -m dispatch_fn``: the command line, and the exit statuses it answers with.

``main`` is the entry (``pyproject.toml``'s script, ``__main__``);
``ExitStatus`` the statuses of docs/contract.md#exit-statuses. The face loads
a module when one of its names is first used, not on import (as ``db``'s
does): the bench and the tests start the embedded PostgreSQL
(``cli.embedded``) without loading the command line and the data layer
behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch_fn.faces import lazy_face

if TYPE_CHECKING:
    from dispatch_fn.cli.commands import main
    from dispatch_fn.cli.exit_status import ExitStatus

__all__ = ["ExitStatus", "main"]

_HOME: dict[str, str | None] = {"ExitStatus": "exit_status", "main": "commands"}


if not TYPE_CHECKING:  # the type checker reads the imports above instead
    __getattr__, __dir__ = lazy_face(__name__, _HOME)

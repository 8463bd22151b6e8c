"""``python -m dispatch_fn``: the command line, and the exit statuses it answers with.

``main`` is the entry (``pyproject.toml``'s script, ``__main__``);
``ExitStatus`` the statuses of docs/contract.md#exit-statuses. The commands'
modules behind it load as a command needs them.
"""

from dispatch_fn.cli.exit_status import ExitStatus
from dispatch_fn.cli.main import main

__all__ = ["ExitStatus", "main"]

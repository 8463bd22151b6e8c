"""What AWS calls: the Lambda handler, its events, the migration step, the secret's rotation.

``app.lambda_handler`` is the function's entry (docs/contract.md#invocation)
and ``migrate_resource.handler`` the migration step's (docs/handler.md); both
are named by the template, so their modules stay where they are. The face
names what the command line uses of this package: the handler with its
dependencies passed in (``handle``, ``runtime_for``, ``logger``) and the
event parser's own readings of a day and an instant.

The face loads a module when one of its names is first used, not on import
(as ``concurrent.futures`` does): parsing an event (``events``) loads
neither the database driver nor the run loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch_fn.faces import lazy_face

if TYPE_CHECKING:
    from dispatch_fn.aws.events import day_of, instant_of, parse_event
    from dispatch_fn.aws.invocation import handle, logger, runtime_for

__all__ = ["day_of", "handle", "instant_of", "logger", "parse_event", "runtime_for"]

# Where each name of the face is defined: the module that loads on its first use.
_HOME = {
    **dict.fromkeys(("day_of", "instant_of", "parse_event"), "events"),
    **dict.fromkeys(("handle", "logger", "runtime_for"), "invocation"),
}

if not TYPE_CHECKING:  # the type checker reads the imports above instead
    __getattr__, __dir__ = lazy_face(__name__, _HOME)

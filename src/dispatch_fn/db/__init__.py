"""PostgreSQL: connections, migrations, the statements a run executes, the ledger.

Only this package executes SQL (docs/contract.md#tables). Its face names what
other packages use: the connection type and where connections come from,
the migrations, the data layer a run asks (``store``'s statements and the
values they bind and return), and, as namespaces whose functions read with
their module's name, the ledger (``ledger.start``), the fault account
(``faults.record``), the runs table, the dispatcher's login, the lookups
explain and a run's remarks make, and the demo's rows. ``layout`` (the table
layouts of tests and the bench) is no part of it: the functions do not ship it.

The face loads a module when one of its names is first used, not on import
(as ``concurrent.futures`` does for its executors): connecting and migrating
(the migration step's cold start, ``migrate``) load neither the data layer
nor the planner behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch_fn.faces import lazy_face

if TYPE_CHECKING:
    from dispatch_fn.db import demo_data, faults, ledger, logins, lookups, runs_table
    from dispatch_fn.db.database import (
        DEFAULT_SSLMODE,
        ConnectionCache,
        connect,
        conninfo_with_secret,
        open_url,
        secret_fields,
        url_conninfo,
    )
    from dispatch_fn.db.migrate import apply_migrations, schema_state
    from dispatch_fn.db.sql import Connection
    from dispatch_fn.db.store import (
        PAGE_COUNTS,
        Census,
        DueRule,
        DutyForm,
        Group,
        LockedRows,
        NotDispatched,
        PageResult,
        PageStatement,
        Rules,
        any_dispatchable,
        census,
        dispatch_page,
        due_rules,
        estimated_duties,
        fault_members,
        ids_with_form,
        locked_rows,
        page_bounds,
        page_duty_rows,
        page_statement,
        page_taken_ids,
    )

__all__ = [
    "DEFAULT_SSLMODE",
    "PAGE_COUNTS",
    "Census",
    "Connection",
    "ConnectionCache",
    "DueRule",
    "DutyForm",
    "Group",
    "LockedRows",
    "NotDispatched",
    "PageResult",
    "PageStatement",
    "Rules",
    "any_dispatchable",
    "apply_migrations",
    "census",
    "connect",
    "conninfo_with_secret",
    "demo_data",
    "dispatch_page",
    "due_rules",
    "estimated_duties",
    "fault_members",
    "faults",
    "ids_with_form",
    "ledger",
    "locked_rows",
    "logins",
    "lookups",
    "open_url",
    "page_bounds",
    "page_duty_rows",
    "page_statement",
    "page_taken_ids",
    "runs_table",
    "schema_state",
    "secret_fields",
    "url_conninfo",
]

# Where each name of the face is defined: the module that loads on its first use.
_HOME = {
    **dict.fromkeys(("demo_data", "faults", "ledger", "logins", "lookups", "runs_table"), None),
    **dict.fromkeys(
        (
            "DEFAULT_SSLMODE",
            "ConnectionCache",
            "connect",
            "conninfo_with_secret",
            "open_url",
            "secret_fields",
            "url_conninfo",
        ),
        "database",
    ),
    **dict.fromkeys(("apply_migrations", "schema_state"), "migrate"),
    "Connection": "sql",
    **dict.fromkeys(
        (
            "PAGE_COUNTS",
            "Census",
            "DueRule",
            "DutyForm",
            "Group",
            "LockedRows",
            "NotDispatched",
            "PageResult",
            "PageStatement",
            "Rules",
            "any_dispatchable",
            "census",
            "dispatch_page",
            "due_rules",
            "estimated_duties",
            "fault_members",
            "ids_with_form",
            "locked_rows",
            "page_bounds",
            "page_duty_rows",
            "page_statement",
            "page_taken_ids",
        ),
        "store",
    ),
}


if not TYPE_CHECKING:  # the type checker reads the imports above instead
    __getattr__, __dir__ = lazy_face(__name__, _HOME)

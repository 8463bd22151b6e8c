"""The faults of a run that are new: duties the previous completed clock did not fault.

A duty that stays broken faults at every run, so an alarm on a run's faults
stays in ALARM from the first of them, and a second broken duty notifies no
one. ``NewFaults``, the count this module gives, is what the stack's
Degraded alarm watches instead: it rises only when something broke since the
previous completed clock, and falls back to 0 at the next run (the dashboard
shows the faults that persist).

Computed from the ledger's reports in one statement
(statements/run_new_faults.sql), which says how a report's capped fault list
keeps it a lower bound that is exact when nothing was omitted.
"""

from __future__ import annotations

import logging

import psycopg

from dispatch_fn.db.sql import Connection, statement

_log = logging.getLogger("duly.new_faults")


def count(conn: Connection, run_id: int | None, faults: int) -> int:
    """How many of the ``faults`` of the recorded run ``run_id`` are new.

    When the ledger cannot answer, every fault of the run counts as new: an
    alarm raised once too often beats a new broken duty nobody hears of.
    """
    if run_id is None:
        return faults
    try:
        row = conn.execute(statement("run_new_faults"), {"run_id": run_id}).fetchone()
    except psycopg.Error as exc:
        _log.warning("new faults not counted, all %d counted as new: %s", faults, exc)
        return faults
    return faults if row is None else int(row[0])

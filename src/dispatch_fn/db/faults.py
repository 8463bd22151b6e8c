"""The faults on the duties' account: each faulted duty, with the run its fault began in.

A duty that stays broken faults at every run, so an alarm on a run's faults
stays in ALARM from the first of them, and a second broken duty notifies no
one. ``NewFaults``, which the stack's Degraded alarm watches instead, is the
count ``record`` returns: the duties whose fault began in this run, however
many duties are faulted and however often an event is delivered.

Every run that writes (scheduled or backfill, scoped or not) keeps the
account for the duties it judged, after its ledger row has ended: it adds a
row, ``since`` its clock, for each duty it faulted that has none, and removes
the row of each duty it judged without a fault (docs/contract.md#metrics).
A dry run, and a run that failed, leave it as it was. One statement does
both (statements/faults_record.sql says what "judged" covers).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg

from dispatch_fn.bounded import clip
from dispatch_fn.db.sql import Connection, named_row, statement
from dispatch_fn.db.store import scope_params
from dispatch_fn.planning import Fault, Scope

_log = logging.getLogger("duly.faults")


@dataclass(frozen=True, slots=True)
class Judged:
    """What one run found of the duties in its scope.

    ``faults`` is every duty it faulted, not the report's first hundred. It
    judged every other duty in ``scope`` when ``complete``, else those up to
    its gapless mark ``upto`` (None: none), except the duties ``set_aside``
    (by key where their organisation is known, else every row of the id).
    """

    clock: datetime
    scope: Scope
    faults: Sequence[Fault]
    complete: bool
    upto: str | None
    set_aside: Sequence[Fault] = ()


def record(conn: Connection, run_id: int, judged: Judged) -> int:
    """Keep the account of run ``run_id``'s faults; how many of them began in it.

    When the database cannot answer, every fault of the run counts as new: an
    alarm raised once too often beats a new broken duty nobody hears of.
    """
    params = {
        **scope_params(judged.scope),
        "run_id": run_id,
        "clock": judged.clock,
        "fault_ids": [fault.duty_id for fault in judged.faults],
        "fault_organizations": [fault.organization_id for fault in judged.faults],
        "reasons": [str(fault.reason) for fault in judged.faults],
        # Clipped as the report clips it, so a row stays small whatever the value it quotes.
        "details": [clip(fault.detail) for fault in judged.faults],
        "complete": judged.complete,
        "upto": judged.upto,
        "set_aside": [each.duty_id for each in judged.set_aside],
        "set_aside_organizations": [each.organization_id for each in judged.set_aside],
    }
    try:
        # Unprepared, as the data layer runs its scoped statements (store says why).
        row = named_row(conn.execute(statement("faults_record"), params, prepare=False))
    except psycopg.Error as exc:
        _log.warning(
            "faults not recorded, all %d counted as new: %s: %s",
            len(judged.faults),
            type(exc).__name__,
            exc,
        )
        return len(judged.faults)
    assert row is not None  # noqa: S101 - an aggregate returns one row
    return int(row["began"])

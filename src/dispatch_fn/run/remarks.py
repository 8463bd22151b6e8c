"""What a run says beside its report: whether its scope names any duty, and a dry run's why.

docs/contract.md#report: a scoped run whose scope names no duty at all says
so (``scope_matched``, ``scope_note``), rather than report a quiet success;
a dry run naming at most ``MAX_EXPLAINED`` duties explains each
(docs/contract.md#explain), whole duties up to ``EXPLAIN_BYTES``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import psycopg

from dispatch_fn.bounded import scope_echo
from dispatch_fn.db import Connection, lookups
from dispatch_fn.planning import RunRequest, Scope
from dispatch_fn.run._explain import EXPLAIN_BYTES, MAX_EXPLAINED, explain_each
from dispatch_fn.run.outcome import Remarks, RunOutcome
from dispatch_fn.run.recorded import dispatch_recorded
from dispatch_fn.run.runtime import Runtime


def dispatch_remarked(
    conns: Sequence[Connection], request: RunRequest, runtime: Runtime
) -> RunOutcome:
    """An invocation's run: ``request`` run recorded (``dispatch_recorded``), then remarked on.

    Raises ``RunFailedError`` as ``dispatch_recorded`` does; the remarks are
    made once the run has ended, and its ledger row with it.
    """
    outcome = dispatch_recorded(conns, request, runtime)
    said = remarks_on(
        conns[0], request, catch_up_days=runtime.tuning.catch_up_days, rules=runtime.rules()
    )
    return replace(outcome, remarks=said)


def remarks_on(conn: Connection, request: RunRequest, *, catch_up_days: int, rules: str) -> Remarks:
    """The remarks on a run of ``request`` that has ended: its scope's match, a dry run's why.

    ``rules``: those the run judged by (``Runtime.rules``), as its explanations do.
    """
    matched, note = _scope_matched(conn, request.scope)
    duty_ids = request.scope.duty_ids
    if not request.dry_run or duty_ids is None or len(duty_ids) > MAX_EXPLAINED:
        return Remarks(matched, note, None)
    # A console user's "why": the planner's verdict per candidate period.
    each = explain_each(
        conn,
        duty_ids,
        request.now,
        request.window,
        interval=request.interval,
        catch_up_days=catch_up_days,
        rules=rules,
        organization_id=request.scope.organization_id,
    )
    return Remarks(matched, note, _within_budget(each, len(set(duty_ids))))


def _scope_matched(conn: Connection, scope: Scope) -> tuple[bool | None, str | None]:
    """Whether any duty matches ``scope`` (None: unscoped, or unknown) and if none, a note."""
    if not scope.named:
        return None, None
    # The scope as the event named it: a continuation's resume point may pass every duty.
    named = Scope(organization_id=scope.organization_id, duty_ids=scope.duty_ids)
    try:
        if lookups.scope_matches(conn, named):
            return True, None
    except psycopg.Error:
        # The run is over and recorded; only this remark about it is unknown.
        return None, None
    echo = scope_echo(scope.organization_id, scope.duty_ids)
    parts = []
    if echo["organization_id"] is not None:
        parts.append(f"organization_id {echo['organization_id']!r}")
    if echo["duty_ids"] is not None:
        more = echo["duty_ids_count"] - len(echo["duty_ids"])
        ids = ", ".join(map(repr, echo["duty_ids"])) + (f" and {more} more" if more else "")
        parts.append(f"duty_ids {ids}")
    return False, f"no duty matches the scope ({' and '.join(parts)}): nothing was dispatched"


def _within_budget(explained: Iterator[tuple[str, dict[str, Any]]], named: int) -> dict[str, Any]:
    """The explanations that fit the response, whole duties in order, and how many did not.

    ``explained`` is consumed only until the budget is spent: the duties past
    it are never computed, so the run's memory holds the budget, not every
    duty's candidates (``named`` counts them all).
    """
    kept: dict[str, dict[str, Any]] = {}
    used = 0
    for duty_id, explanation in explained:
        size = len(json.dumps(explanation))
        if used + size > EXPLAIN_BYTES:
            break
        kept[duty_id] = explanation
        used += size
    omitted = named - len(kept)
    return {
        "explain": kept,
        "explain_omitted": omitted,
        "explain_hint": None
        if omitted == 0
        else (
            f"{omitted} duties' explanations did not fit in the response; "
            "`python -m dispatch_fn explain DUTY_ID` explains one, or narrow the window"
        ),
    }

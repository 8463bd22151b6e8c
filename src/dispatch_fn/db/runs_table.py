"""The run ledger as ``python -m dispatch_fn runs`` shows it: a table, or JSON for machines.

``runs show ID`` gives one run's whole record: its ledger row, its report and
the duties it set aside.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any, Final

from dispatch_fn.db import ledger
from dispatch_fn.db.sql import Connection

# The set-aside ledger's reason for a fault it keeps owed a fresh judgement.
_REFUSED: Final = "refused"
_COLUMNS: Final = (
    "id", "clock", "mode", "status", "created", "existing", "faults", "duration", "notes",
)  # fmt: skip


def render(
    conn: Connection,
    *,
    limit: int,
    as_json: bool,
    mode: str | None = None,
    status: str | None = None,
) -> str:
    """The ``limit`` newest runs (of ``mode``, with ``status``) as a text table, or JSON."""
    rows = ledger.recent(conn, limit, mode=mode, status=status)
    if as_json:
        return json.dumps([json_row(row) for row in rows], indent=2)
    if not rows:
        given = [f"{name} {value}" for name, value in (("mode", mode), ("status", status)) if value]
        return f"no runs with {' and '.join(given)}" if given else "no runs recorded yet"
    return _table([_text_row(row) for row in rows])


def render_one(record: ledger.RunRecord, *, as_json: bool) -> str:
    """One run's whole record: its ledger fields, its report and its set-aside duties.

    The ledger's rows of duties the server refused while the run judged them
    afresh (migration 0025) are faults, not set aside: listed apart, as
    ``refused_afresh``.
    """
    fields = json_row(record.row)
    entries = [{name: _plain(value) for name, value in entry.items()} for entry in record.set_aside]
    fields["set_aside"] = [entry for entry in entries if entry["reason"] != _REFUSED]
    fields["refused_afresh"] = [entry for entry in entries if entry["reason"] == _REFUSED]
    if as_json:
        return json.dumps(fields, indent=2)
    report = fields.pop("report")
    set_aside = fields.pop("set_aside")
    refused = fields.pop("refused_afresh")
    width = max(map(len, fields))
    lines = [f"{name:<{width}}  {_shown(value)}" for name, value in fields.items()]
    lines.append("")
    if set_aside:
        lines.append(f"set aside ({len(set_aside)}):")
        lines.extend(map(_ledger_line, set_aside))
    else:
        lines.append("set aside: none")
    if refused:
        lines.append(f"refused while judged afresh, owed that judgement ({len(refused)}):")
        lines.extend(map(_ledger_line, refused))
    lines.append("")
    lines.append("report:" if report is not None else "report: none (the run has not finished)")
    if report is not None:
        lines.append(json.dumps(report, indent=2))
    return "\n".join(lines)


def _ledger_line(entry: dict[str, Any]) -> str:
    # repaid_by is written only on rows from before migration 0012: since
    # then the duty's account owes it to the next run that reads it.
    return (
        f"  {entry['duty_id']}  {entry['reason']}  owed from {entry['owed_from']}"
        + (f"  of {entry['organization_id']}" if entry["organization_id"] else "")
        + (f"  repaid by run {entry['repaid_by']}" if entry["repaid_by"] else "")
    )


def _shown(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def json_row(row: ledger.LedgerRow) -> dict[str, Any]:
    """One run as ``runs --json`` and the ``runs`` query give it."""
    fields = {name: _plain(value) for name, value in row.fields.items()}
    if "duty_ids_count" not in fields:  # one run whole: every id, and their count beside them
        ids = row.fields["duty_ids"]
        fields["duty_ids_count"] = None if ids is None else len(ids)
    fields["status"] = row.shown_status
    if "tasks_created" in fields:  # a list's row (one run whole carries its report instead)
        # A dry run created nothing: its figure is what it would have created.
        fields["tasks_would_create"] = fields["tasks_created"] if fields["dry_run"] else None
    fields["duration_s"] = _seconds(row.fields["started_at"], row.fields["finished_at"])
    return fields


def _text_row(row: ledger.LedgerRow) -> list[str]:
    fields = row.fields
    notes = []
    if fields["window_from"] is not None:
        notes.append(f"window {fields['window_from']}..{fields['window_to'] or 'today'}")
    if fields["organization_id"] is not None:
        notes.append(f"org {fields['organization_id']}")
    if fields["duty_ids"] is not None:
        notes.append(f"{fields['duty_ids_count']} duty id(s)")
    if fields["dry_run"]:
        notes.append("dry run")
    if fields["continues_run"] is not None:
        notes.append(f"continues #{fields['continues_run']} ({fields['continuation']})")
    if fields["beyond_horizon"]:
        notes.append(f"{fields['beyond_horizon']} duty(ies) beyond the horizon")
    if fields["error"]:
        notes.append(str(fields["error"]).splitlines()[0][:60])
    seconds = _seconds(fields["started_at"], fields["finished_at"])
    return [
        str(fields["id"]),
        fields["clock"].isoformat(),
        str(fields["mode"]),
        row.shown_status,
        _created(fields["tasks_created"], dry_run=bool(fields["dry_run"])),
        _count(fields["tasks_existing"]),
        _count(fields["faults"] if fields["finished_at"] is not None else None),
        "-" if seconds is None else f"{seconds:.2f} s",
        "; ".join(notes),
    ]


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(name), *(len(row[i]) for row in rows)) for i, name in enumerate(_COLUMNS)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (_COLUMNS, *rows)
    ]
    return "\n".join(lines)


def _created(value: object, *, dry_run: bool) -> str:
    if value is None or not dry_run:
        return _count(value)
    return f"would create {value}"


def _count(value: object) -> str:
    return "-" if value is None else str(value)


def _seconds(started: datetime, finished: datetime | None) -> float | None:
    return None if finished is None else (finished - started) / timedelta(seconds=1)


def _plain(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value

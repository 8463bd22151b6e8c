"""A run's report as a few lines a person reads: what the CLI and the demo print."""

from __future__ import annotations

from typing import Any


def headline(title: str, report: dict[str, Any]) -> str:
    """The run's mode, clock and window, and whether it was a dry run."""
    window = report["window"]
    span = f"  window {window['from']} .. {window['to']}" if window else ""
    dry = " (dry run: nothing written)" if report.get("dry_run") else ""
    return f"## {title}: {report['mode']} at clock {report['now']}{span}{dry}"


def report_lines(title: str, report: dict[str, Any]) -> list[str]:
    """The headline, counts, skips and faults of one run's report, in a few lines."""
    created, advanced = _verbs(report)
    lines = [
        headline(title, report),
        f"   duties read {report['duties_read']}, {created} {report['tasks_created']},"
        f" already there {report['tasks_existing']}, {advanced} {report['duties_advanced']},"
        f" degraded {report['degraded']}",
    ]
    skipped = ", ".join(f"{reason} {n}" for reason, n in report["skipped"].items() if n)
    lines.append(f"   skipped: {skipped or 'none'}")
    return [*lines, *_tail(report)]


def summary_lines(title: str, report: dict[str, Any]) -> list[str]:
    """The headline, then one table of the counts, then the faulted duties: each figure once."""
    created, advanced = _verbs(report)
    faults = sum(report["fault_counts"].values())
    rows = [
        (created, report["tasks_created"]),
        ("tasks already there", report["tasks_existing"]),
        ("duties read", report["duties_read"]),
        (advanced, report["duties_advanced"]),
        *((f"skipped: {reason}", n) for reason, n in report["skipped"].items() if n),
        *([("faults", faults)] if faults else []),
    ]
    note = [f"note: {report['scope_note']}"] if report.get("scope_note") else []
    return [headline(title, report), *note, "", *table_lines(("", "count"), rows), *_tail(report)]


def _verbs(report: dict[str, Any]) -> tuple[str, str]:
    """How the counts of new tasks and advanced duties read: done, or only planned (a dry run)."""
    if report.get("dry_run"):
        return "tasks it would create", "duties it would advance"
    return "tasks created", "duties advanced"


def _tail(report: dict[str, Any]) -> list[str]:
    """The faulted duties, and whether and where the run stopped, and how long it took."""
    lines = [
        f"   fault: {fault['duty_id']} {fault['reason']} ({fault['detail']})"
        for fault in report["faults"]
    ]
    if report.get("faults_omitted"):
        lines.append(f"   ... {report['faults_hint']}")
    if report.get("complete") is False:
        lines.append(
            f"   incomplete: stopped after duty {report.get('last_duty_id')!r};"
            " invoking the same event again completes it"
        )
    if "duration_ms" in report:
        lines.append(f"   took {report['duration_ms'] / 1000:.1f} s over {report['pages']} page(s)")
    return lines


def table_lines(headers: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    """Rows under their headers, each column as wide as its widest cell; numbers right-aligned."""
    cells = [tuple(str(value) for value in row) for row in rows]
    widths = [max(len(text) for text in column) for column in zip(headers, *cells, strict=True)]
    numeric = [
        bool(rows) and all(isinstance(row[i], int) for row in rows) for i in range(len(headers))
    ]

    def line(values: tuple[str, ...]) -> str:
        parts = [
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ]
        return "   " + "  ".join(parts).rstrip()

    return [line(headers), *(line(row) for row in cells)]

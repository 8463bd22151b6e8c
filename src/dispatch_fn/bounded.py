"""Bounded echoes of unbounded input, for messages, reports and log lines.

A user can send (or store) a value of any size or depth; what the dispatcher
says about it stays small, because Lambda answers at most 6 MB and CloudWatch
takes log events of at most 256 KB. Nothing here recurses into a value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

# Characters of a long string quoted in a message: enough to recognise it.
QUOTE_CHARS: Final = 40
# Duty ids a report echoes of its scope; the count covers them all.
ID_SAMPLE: Final = 10
# JSON bytes one echoed string may take in a report (an escaped character
# takes up to 12), so 100 faults stay far below CloudWatch's 256 KB.
FIELD_BYTES: Final = 400
_MARK: Final = "..."
# The payload an asynchronous Invoke takes (a run's hand-off to its
# continuation): 1 MB today, 256 KB until 2025 and in some partitions still;
# the smaller, everywhere.
MAX_EVENT_BYTES: Final = 256 * 1024


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr`` of a short value; a long string's prefix and length; a container's kind."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}{_MARK} ({len(value)} characters)"
    if isinstance(value, int) and value.bit_length() > 64:
        # repr of a huge int is slow, and refused beyond 4,300 digits.
        return "a very large integer"
    if value is None or isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping | list | tuple):
        kind = (
            "a JSON object of {} field(s)"
            if isinstance(value, Mapping)
            else "a JSON array of {} item(s)"
        )
        return kind.format(len(value))
    return f"a {type(value).__name__}"


def clip(text: str, budget: int = FIELD_BYTES) -> str:
    """``text``, or its longest prefix (marked) whose JSON spelling fits ``budget`` bytes."""
    if len(_json(text)) <= budget:
        return text
    low, high = 0, min(len(text), budget)
    while low < high:  # the longest prefix that fits, found by bisection
        middle = (low + high + 1) // 2
        if len(_json(text[:middle] + _MARK)) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + _MARK


def scope_echo(organization_id: str | None, duty_ids: Sequence[str] | None) -> dict[str, Any]:
    """A run's scope as a report shows it: the first few duty ids and how many there are."""
    return {
        "organization_id": None if organization_id is None else clip(organization_id),
        "duty_ids": None if duty_ids is None else [clip(i) for i in duty_ids[:ID_SAMPLE]],
        "duty_ids_count": None if duty_ids is None else len(duty_ids),
    }


def fault_listing(faults: Sequence[Mapping[str, str]], total: int) -> dict[str, Any]:
    """The listed faults, clipped, with how many more were counted and how to see them."""
    omitted = max(total - len(faults), 0)
    return {
        "faults": [{key: clip(str(text)) for key, text in fault.items()} for fault in faults],
        "faults_omitted": omitted,
        "faults_hint": None
        if omitted == 0
        else (
            f"{omitted} more faulty duties are counted in fault_counts but not listed; "
            "a dry run scoped by organization_id or duty_ids lists the faults among those"
        ),
    }


def _json(text: str) -> str:
    return json.dumps(text)

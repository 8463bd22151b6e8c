"""The largest backfill the window cap allows completes in bounded pages, every row exactly once.

In the gate at a small size (200 daily duties, 400 days, a 10,000-row budget);
``DULY_SOAK=1`` runs the issue's own case: 20,000 daily duties over the
1,827-day cap with the function's defaults (~36.5 M rows; tens of minutes).
"""

from __future__ import annotations

import os

import pytest

from bench.large_backfill import backfill
from dispatch_fn import settings

SOAK = os.environ.get("DULY_SOAK") == "1"
DUTIES, DAYS, PAGE_ROWS = (
    (20_000, settings.DEFAULT_MAX_WINDOW_DAYS, settings.DEFAULT_PAGE_ROWS)
    if SOAK
    else (200, 400, 10_000)
)

pytestmark = pytest.mark.slow


def test_the_largest_backfill_completes_in_pages_within_the_budget_exactly(db_url: str) -> None:
    measured = backfill(db_url, DUTIES, DAYS, page_rows=PAGE_ROWS)

    assert measured.report.complete
    assert measured.tasks == measured.distinct == measured.expected == DUTIES * DAYS
    assert measured.report.tasks_created == DUTIES * DAYS
    # Every page within the budget (a daily duty owes DAYS rows, far below it).
    assert max(rows for _, rows in measured.pages) <= PAGE_ROWS
    assert len(measured.pages) >= DUTIES * DAYS // PAGE_ROWS
    if SOAK:
        # Far from the deployed 300 s statement_timeout, however loaded the server.
        timeout_s = settings.Settings().statement_timeout_ms / 1000
        assert max(seconds for seconds, _ in measured.pages) < timeout_s / 2

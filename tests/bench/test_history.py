"""The bench's history pass at a tiny N: years of past tasks, and the same day with and without."""

from __future__ import annotations

from datetime import UTC, datetime, time

import psycopg
import pytest

from bench.dispatch.child import ChildSpec
from bench.dispatch.data import CLOCK, generate
from bench.dispatch.dispatcher import run_child
from bench.dispatch.history import HistoryOptions, add_history, render_history, run_history
from bench.dispatch.mix import CLASSIC
from bench.dispatch.server import fresh_database, scalar
from dispatch_fn.engine import period_key_for
from support import session_layout

pytestmark = pytest.mark.slow


def test_the_history_is_past_periods_spelled_as_the_engine_spells_them(server_dsn: str) -> None:
    with (
        fresh_database(server_dsn, "history", session_layout()) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        generate(conn, 300, 20, CLASSIC)
        run_child(conn, ChildSpec(dsn=dsn, now=CLOCK.isoformat(), chunk_size=100, workers=1))
        tasks = int(scalar(conn, "SELECT count(*) FROM duly_task"))
        assert add_history(conn, 5) == pytest.approx(5 * tasks, rel=0.01)
        rows = conn.execute(
            "SELECT d.frequency, t.period_key, duly_period_first_day(t.period_key)"
            " FROM duly_task t JOIN duly_duty d ON d.id = t.duty_id"
            " WHERE t.status = 'done'"
        ).fetchall()
        assert len(rows) > 3 * tasks
        frequencies = set()
        for frequency, key, first_day in rows:
            frequencies.add(frequency)
            at = datetime.combine(first_day, time(12), tzinfo=UTC)
            assert period_key_for(frequency, at, "UTC") == key
        assert {"daily", "weekly", "fortnightly", "monthly", "quarterly", "annual"} <= frequencies
        # Every past period is before the first run's, duty by duty: it owes nothing.
        later = scalar(
            conn,
            "SELECT count(*) FROM duly_task h JOIN duly_task t USING (organization_id, duty_id,"
            " owner_id) WHERE h.status = 'done' AND t.status = 'open'"
            " AND duly_period_first_day(h.period_key) >= duly_period_first_day(t.period_key)",
        )
        assert later == 0


def test_the_same_day_is_run_with_and_without_the_history(server_dsn: str) -> None:
    options = HistoryOptions(duties=400, factor=3, layout=session_layout(), chunk_size=200)
    results = run_history(options, server_dsn)
    without, with_history = results.without, results.with_history
    assert without.day.tasks_created == with_history.day.tasks_created > 0
    assert with_history.tasks_before_day == pytest.approx(3 * without.tasks_before_day, rel=0.01)
    assert results.wall_ratio == pytest.approx(with_history.day.seconds / without.day.seconds)
    table = render_history(results)
    assert "(goal) <= 1.20x" in table
    # The day reads what it owes: every duty it counts as read is one it judged
    # (owing something, or none) or one not dispatched, counted from an index.
    report = without.day.report
    skipped = report["skipped"]
    not_dispatched = sum(skipped[r] for r in ("standing", "one_off", "not_active", "not_approved"))
    judged_none = skipped["nothing_due"] + skipped["outside_effective_window"]
    assert not_dispatched > 0
    assert report["duties_read"] == report["duties_owing"] + judged_none + not_dispatched
    assert judged_none <= report["duties_owing"] // 100
    row = next(line for line in table.splitlines() if line.startswith("without history"))
    assert row.split()[-3:] == [
        f"{report['duties_owing']:,}",
        f"{judged_none:,}",
        f"{not_dispatched:,}",
    ]
    assert results.as_json()["with_history"]["tasks_before_day"] == with_history.tasks_before_day

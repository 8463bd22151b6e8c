"""Imports point one way: the event contract and the settings stand without the database."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _modules_after_importing(module: str) -> set[str]:
    # A fresh interpreter: this one has imported everything already.
    probe = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(completed.stdout))


@pytest.mark.parametrize("module", ["dispatch_fn.events", "dispatch_fn.settings"])
def test_parsing_events_and_reading_settings_load_no_database_driver_and_no_run_loop(
    module: str,
) -> None:
    loaded = _modules_after_importing(module)
    assert "psycopg" not in loaded
    assert {"dispatch_fn.dispatch", "dispatch_fn.store", "dispatch_fn.database"}.isdisjoint(loaded)


def test_the_run_loop_loads_no_event_parser_and_no_holiday_tables() -> None:
    # The Lambda loads the parser anyway; a run made from the CLI, the bench or
    # a test does not need it, and a run without calendars needs no holidays.
    loaded = _modules_after_importing("dispatch_fn.dispatch")
    assert "pydantic" not in loaded
    assert "dispatch_fn.events" not in loaded
    assert "holidays" not in loaded


@pytest.mark.parametrize("module", ["dispatch_fn.database", "dispatch_fn.migrate"])
def test_connections_and_migrations_load_neither_the_data_layer_nor_the_planner(
    module: str,
) -> None:
    loaded = _modules_after_importing(module)
    assert {"dispatch_fn.store", "dispatch_fn.plan", "dispatch_fn.dispatch"}.isdisjoint(loaded)

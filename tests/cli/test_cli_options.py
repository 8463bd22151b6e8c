"""`invoke --dry-run` and `--now`, `--version`, and help a person reads: plain text, every
command described, every setting's variable and default listed from `Settings` itself."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
from collections.abc import Iterator
from dataclasses import fields

import pytest

from dispatch_fn.cli import ExitStatus, invoke
from dispatch_fn.cli.commands import build_parser
from dispatch_fn.settings import Settings
from support import CLOCK, EVENTS_DIR, NOW, Conn, cli, duty, insert_duties, task_count


def _report(*argv: str) -> dict[str, object]:
    completed = cli("invoke", "--json", *argv)
    assert completed.returncode == ExitStatus.OK, completed.stderr
    report: dict[str, object] = json.loads(completed.stdout)
    return report


def test_dry_run_writes_nothing_and_counts_what_it_would_create(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    report = _report("--dry-run", str(EVENTS_DIR / "backfill-13-months.json"))
    assert (report["dry_run"], report["tasks_created"]) == (True, 13)
    assert task_count(conn) == 0


def test_now_sets_the_runs_clock(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    report = _report("--now", "2026-03-15T01:00Z", str(EVENTS_DIR / "console.json"))
    assert report["now"] == "2026-03-15T01:00:00+00:00"
    assert report["mode"] == "scheduled"


@pytest.mark.parametrize("envelope", ["scheduler.json", "scheduled-event.json"])
def test_a_schedule_envelope_with_dry_run_is_the_dry_scheduled_run_at_its_time(
    conn: Conn, database: str, envelope: str
) -> None:
    insert_duties(conn, [duty("d1")])
    report = _report("--dry-run", str(EVENTS_DIR / envelope))
    assert (report["mode"], report["now"], report["dry_run"]) == (
        "scheduled", "2026-11-29T01:00:00+00:00", True,
    )  # fmt: skip
    assert task_count(conn) == 0
    moved = _report("--now", CLOCK, str(EVENTS_DIR / envelope))
    assert (moved["now"], moved["dry_run"]) == (NOW.isoformat(), False)


def test_a_bad_now_is_refused_with_the_fields_reason(conn: Conn, database: str) -> None:
    completed = cli("invoke", "--now", "yesterday", str(EVENTS_DIR / "console.json"))
    assert completed.returncode == ExitStatus.REFUSED
    assert "now: 'yesterday' is not an ISO 8601 instant" in completed.stderr
    assert len(completed.stderr.splitlines()) == 1


def test_version_is_the_installed_packages() -> None:
    completed = cli("--version")
    assert completed.returncode == 0
    version = importlib.metadata.version("duly-dispatcher")
    assert completed.stdout.strip() == f"python -m dispatch_fn {version}"


def _every_help() -> Iterator[tuple[str, str]]:
    """The help of the command line and of each command (and sub-command), as printed."""
    pending: list[tuple[str, argparse.ArgumentParser]] = [("", build_parser())]
    while pending:
        name, parser = pending.pop()
        yield name, parser.format_help()
        for action in parser._actions:  # argparse keeps its sub-parsers only here
            if isinstance(action, argparse._SubParsersAction):
                pending.extend((f"{name} {sub}".strip(), p) for sub, p in action.choices.items())


def test_no_help_shows_restructuredtext_markup() -> None:
    helps = dict(_every_help())
    assert {"", "migrate", "invoke", "demo", "runs", "runs show", "explain", "stop-db"} <= set(
        helps
    )
    for name, text in helps.items():
        assert "``" not in text, name
        assert not re.search(r":(func|class|mod):`", text), name


@pytest.mark.parametrize("command", ["migrate", "stop-db"])
def test_migrate_and_stop_db_say_what_they_do(command: str) -> None:
    helps = dict(_every_help())
    listing = next(line for line in helps[""].splitlines() if line.split()[:1] == [command])
    assert len(listing.split()) > 4, listing
    description = helps[command].split("\n\n")[1]
    assert len(description.split()) > 10, helps[command]


def _environment_entries(help_text: str) -> dict[str, str]:
    """The help's environment section: each variable's text, its wrapped lines joined."""
    block = help_text.split("environment:\n", 1)[1].split("\n\n", 1)[0]
    entries: dict[str, str] = {}
    name = ""
    for line in block.splitlines():
        text = line
        if not line.startswith("   "):  # a variable's first line; the rest are indented more
            name, _, text = line.strip().partition(" ")
        entries[name] = " ".join([*entries.get(name, "").split(), *text.split()])
    return entries


def test_help_lists_every_variable_settings_reads_with_its_default() -> None:
    read = invoke.settings_variables()
    assert {"DATABASE_URL", "DISPATCH_CHUNK_SIZE", "DISPATCH_SCHEDULE_INTERVAL_HOURS"} <= set(read)
    assert set(read) == set(invoke.SETTING_VARIABLES)  # each one described
    defaults = Settings.from_environ({})
    field_names = {field.name for field in fields(Settings)}
    entries = _environment_entries(cli("invoke", "--help").stdout)
    for name in read:
        field, meaning = invoke.SETTING_VARIABLES[name]
        assert field in field_names, name
        assert entries[name].startswith(" ".join(meaning.split())), (name, entries[name])
        value = getattr(defaults, field)
        if isinstance(value, int) and not isinstance(value, bool):
            assert entries[name].endswith(f"(default {value})"), (name, entries[name])
            # The variable sets that very field.
            assert getattr(Settings.from_environ({name: "1"}), field) == 1, name


def test_top_level_help_lists_the_dispatch_variables_too() -> None:
    text = cli("--help").stdout
    for name in invoke.settings_variables():
        assert f"  {name} " in text, name

"""`invoke`'s summary on a terminal: each figure said once, and a dry run says what it would do."""

from __future__ import annotations

import argparse

from dispatch_fn.cli import ExitStatus, invoke
from support import EVENTS_DIR, Conn, Terminal, duty, insert_duties, task_count


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    invoke.register(parser.add_subparsers())
    return parser.parse_args(["invoke", *argv])


def _on_a_terminal(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = Terminal(), Terminal()
    status = invoke.run(_args(*argv), stdout=stdout, stderr=stderr)
    return status, stdout.getvalue(), stderr.getvalue()


def test_the_summary_says_each_figure_once(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1"), duty("d2", timezone="Mars/Olympus")])
    status, summary, _ = _on_a_terminal(str(EVENTS_DIR / "backfill-13-months.json"))
    assert status == ExitStatus.DEGRADED
    assert summary.count("## invoke:") == 1
    for figure in ("tasks created", "already there", "duties read", "duties advanced"):
        assert summary.count(figure) == 1, (figure, summary)
    # The faulted duty is named once, with its reason.
    assert summary.count("d2") == 1, summary
    assert summary.count("invalid_cadence") == 1, summary


def test_a_dry_run_summary_says_would_create_and_writes_nothing(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty(f"d{n}") for n in range(3)])
    status, summary, bar = _on_a_terminal(str(EVENTS_DIR / "backfill-dry-run.json"))
    assert status == ExitStatus.OK
    assert "dry run" in summary.splitlines()[0]
    assert "tasks created" not in summary
    rows = {
        line.rsplit(maxsplit=1)[0].strip(): line.split()[-1]
        for line in summary.splitlines()[1:]
        if line.strip()
    }
    assert rows["tasks it would create"] == "39"  # 3 duties x 13 months
    assert "would_create=39" in bar
    assert "created=" not in bar.replace("would_create=", "")
    assert task_count(conn) == 0


def test_a_real_run_bar_says_created(conn: Conn, database: str) -> None:
    insert_duties(conn, [duty("d1")])
    status, _, bar = _on_a_terminal(str(EVENTS_DIR / "backfill-13-months.json"))
    assert status == ExitStatus.OK
    assert "created=13" in bar
    assert "would_create" not in bar

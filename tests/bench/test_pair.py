"""The pairing of two checkouts' no-ops at a tiny N, so it cannot rot; timings not asserted."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from bench.dispatch.child import ChildSpec, changed_fields
from bench.dispatch.mix import COMPLIANCE
from bench.dispatch.pair import PairOptions, parse_pair_options, ratios, render_ratios, run_pair
from support import session_layout

pytestmark = pytest.mark.slow

_ROOT = Path(__file__).resolve().parents[2]


def test_pairing_alternates_two_checkouts_no_ops_and_reads_every_figure(
    server_dsn: str, tmp_path: Path
) -> None:
    # A copy of this checkout's dispatcher stands in for an earlier commit's:
    # its fingerprint differs once one of its sources does.
    other = tmp_path / "other"
    other.mkdir()
    for name in ("bench", "src"):
        ignored = shutil.ignore_patterns("__pycache__", "results")
        shutil.copytree(_ROOT / name, other / name, ignore=ignored)
    marker = other / "src" / "dispatch_fn" / "db" / "statements" / "session_ping.sql"
    marker.write_text(marker.read_text() + "-- the other checkout\n")
    options = PairOptions(
        against=other, duties=600, mix=COMPLIANCE.name, layout=session_layout(),
        rounds=2, chunk_size=200,
    )  # fmt: skip

    rounds = run_pair(options, server_dsn)

    assert len(rounds) == 2
    for each in rounds:
        assert each.this.code != each.other.code
        for run in (each.this, each.other):
            assert run.tasks_created == 0
            assert run.duties_read > 0
            assert run.written.total == 0
            assert (run.client_cpu_seconds or 0) > 0
            assert run.process_cpu_seconds >= (run.client_cpu_seconds or 0)
    medians = ratios(rounds)
    host = conninfo_to_dict(server_dsn).get("host") or "/"  # libpq's default: a socket
    local = str(host).startswith("/") or host in ("localhost", "127.0.0.1", "::1")
    # A server elsewhere has no CPU this machine can read.
    assert math.isfinite(medians.pop("server_cpu")) is local
    assert all(math.isfinite(value) and value > 0 for value in medians.values())
    rendered = render_ratios(options, rounds)
    assert "median of 2 alternated rounds' ratios" in rendered
    assert "warning" not in rendered


def test_another_checkout_gets_only_the_fields_a_run_sets() -> None:
    spec = ChildSpec(dsn="dbname=x", now="2026-11-29T01:00:00+00:00", chunk_size=5, workers=2,
                     recorded=True)  # fmt: skip

    assert changed_fields(spec) == {
        "dsn": "dbname=x", "now": "2026-11-29T01:00:00+00:00", "chunk_size": 5, "workers": 2,
        "recorded": True,
    }  # fmt: skip


def test_pairing_refuses_a_directory_that_is_not_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        parse_pair_options(["--against", str(tmp_path)])


def test_pairing_reads_its_options_and_the_server_from_database_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "dbname=elsewhere")

    options = parse_pair_options(["--against", str(_ROOT), "--duties", "500", "--rounds", "2"])

    assert options == PairOptions(
        against=_ROOT, duties=500, rounds=2, database_url="dbname=elsewhere"
    )

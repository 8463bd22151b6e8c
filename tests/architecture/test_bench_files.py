"""The benchmarks stay readable: no file under bench/ passes 400 lines.

A module that outgrows that is split by what it holds (as ``bench.dispatch.child``
was, into ``counting`` and ``budgets``), never into a ``utils``.
"""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
MOST_LINES = 400
# What a bench writes (its figures, ignored by git) and what Python caches.
NOT_SOURCE = frozenset({"results", "__pycache__"})


def _bench_files() -> list[Path]:
    return sorted(
        path
        for path in BENCH.rglob("*")
        if path.is_file() and not NOT_SOURCE & set(path.relative_to(BENCH).parts)
    )


def test_no_bench_file_passes_400_lines() -> None:
    files = _bench_files()
    assert any(path.name == "child.py" for path in files), "bench/ not found where expected"
    long = {
        str(path.relative_to(BENCH.parent)): lines
        for path in files
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    }
    assert not long, f"bench files over {MOST_LINES} lines: {long}"

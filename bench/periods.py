"""Throughput of the period engine, measured side by side in one run.

Run: .venv/bin/python bench/periods.py

Reports calls/s for ``period_key_for``, ``due_date_for`` and ``periods_between``
over a 13-month daily window, cycling through a handful of zones, and how much
faster a cached zone lookup is than reading the zone from the tzdata wheel.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from dispatch_fn.engine import (
    FREQUENCIES,
    _zones,
    due_date_for,
    period_key_for,
    periods_between,
    zone,
)

ZONES = (
    "Asia/Shanghai",
    "America/Los_Angeles",
    "Europe/Berlin",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "Pacific/Apia",
    "UTC",
)
NOW = datetime(2026, 8, 21, 1, tzinfo=UTC)
WINDOW_END = NOW + timedelta(days=395)  # 13 months of daily periods
TARGET_SECONDS = 0.6
ROUNDS = 3


def _rate(call: Callable[[], object]) -> float:
    """Best-of-rounds calls per second for ``call``."""
    batch = 1
    while True:  # grow the batch until one batch takes a measurable time
        started = time.perf_counter()
        for _ in range(batch):
            call()
        elapsed = time.perf_counter() - started
        if elapsed > TARGET_SECONDS / 10:
            break
        batch *= 4
    per_round = max(1, int(batch * TARGET_SECONDS / elapsed))
    best = 0.0
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(per_round):
            call()
        best = max(best, per_round / (time.perf_counter() - started))
    return best


def _cycling[T](values: tuple[T, ...]) -> Callable[[], T]:
    source = itertools.cycle(values)
    return lambda: next(source)


def main() -> None:
    instants = tuple(NOW + timedelta(minutes=97 * step) for step in range(1000))
    next_zone = _cycling(ZONES)
    next_instant = _cycling(instants)
    next_frequency = _cycling(FREQUENCIES)
    keys = {frequency: period_key_for(frequency, NOW, "UTC") for frequency in FREQUENCIES}
    window = periods_between("daily", NOW, WINDOW_END, "Europe/Berlin")

    measured = [
        (
            "period_key_for (7 frequencies, 8 zones)",
            _rate(lambda: period_key_for(next_frequency(), next_instant(), next_zone())),
        ),
        (
            "due_date_for (7 frequencies, 8 zones)",
            _rate(
                lambda: due_date_for(
                    (frequency := next_frequency()), keys[frequency], next_zone(), "period_end", -3
                )
            ),
        ),
        (
            f"periods_between daily, 13 months ({len(window)} keys)",
            _rate(lambda: periods_between("daily", NOW, WINDOW_END, next_zone())),
        ),
        (
            "periods_between monthly, 13 months",
            _rate(lambda: periods_between("monthly", NOW, WINDOW_END, next_zone())),
        ),
    ]
    cached = _rate(lambda: zone(next_zone()))
    uncached = _rate(lambda: _zones.load_zone(next_zone()))

    width = max(len(name) for name, _ in measured) + 2
    print(f"{'operation':<{width}}{'calls/s':>14}{'us/call':>11}")
    print("-" * (width + 25))
    for name, rate in measured:
        print(f"{name:<{width}}{rate:>14,.0f}{1e6 / rate:>11.2f}")
    print(f"{'days per second via periods_between':<{width}}{measured[2][1] * len(window):>14,.0f}")
    print()
    print(f"{'zone lookup, cached (zone)':<{width}}{cached:>14,.0f}{1e6 / cached:>11.2f}")
    print(
        f"{'zone lookup, uncached (read TZif)':<{width}}{uncached:>14,.0f}{1e6 / uncached:>11.2f}"
    )
    print(f"{'cached / uncached':<{width}}{cached / uncached:>13,.0f}x")


if __name__ == "__main__":
    main()

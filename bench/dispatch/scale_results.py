"""What the scale bench is asked to measure, and every figure it measured, N and N/10."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from bench.dispatch.chain import DEFAULT_RESERVE_MS, ChainRun
from bench.dispatch.data import DataSummary
from bench.dispatch.disk import DiskCheck
from bench.dispatch.judging import LAMBDA_TIMEOUT_S
from bench.dispatch.mix import CLASSIC
from bench.dispatch.options import BENCH_DIR
from bench.dispatch.week import Week
from dispatch_fn import settings

DEFAULT_SCALE_DUTIES: Final = 10_000_000


@dataclass(frozen=True, slots=True)
class ScaleOptions:
    """What one scale run measures."""

    duties: int = DEFAULT_SCALE_DUTIES
    chunk_size: int = settings.DEFAULT_CHUNK_SIZE
    workers: int = settings.DEFAULT_WORKERS
    mix: str = CLASSIC.name
    invocation_ms: int = int(LAMBDA_TIMEOUT_S * 1000)
    reserve_ms: int = DEFAULT_RESERVE_MS
    rds_proxy: bool = False
    json_path: Path | None = None
    database_url: str | None = None
    # Sleep before each page: lets a test make a tiny N outlast a short invocation.
    pause_s: float = 0.0
    # After the no-op, the week of daily runs, each a chain, against the floor (``week``).
    week: bool = True

    def result_path(self) -> Path:
        """Where the JSON goes."""
        suffix = "" if self.mix == CLASSIC.name else f"-{self.mix}"
        return self.json_path or BENCH_DIR / "results" / f"scale-{self.duties}{suffix}.json"


@dataclass(frozen=True, slots=True)
class AtN:
    """One N's data, first run, no-op, and the week of daily runs against their floors."""

    data: DataSummary
    first: ChainRun
    noop: ChainRun
    week: Week | None = None


@dataclass(frozen=True, slots=True)
class ScaleVerdict:
    """One line of the scale bar, or a goal printed beside it (``judged`` False)."""

    name: str
    shown: str
    bar: str
    passed: bool
    judged: bool = True


@dataclass(slots=True)
class ScaleResults:
    """Every figure of one scale run."""

    parameters: dict[str, Any]
    server: dict[str, Any]
    disk: DiskCheck
    at_n: AtN
    at_tenth: AtN
    verdicts: list[ScaleVerdict] = field(default_factory=list)

    @property
    def code_versions(self) -> list[str]:
        """Fingerprints of the dispatcher code every link used; more than one is a mixed run."""
        chains = [
            chain
            for at in (self.at_n, self.at_tenth)
            for chain in (
                at.first,
                at.noop,
                *(() if at.week is None else (d.dispatcher for d in at.week.days)),
            )
        ]
        return sorted(
            {link.code for chain in chains if isinstance(chain, ChainRun) for link in chain.links}
        )

    def as_json(self) -> dict[str, Any]:
        """Everything, JSON-serialisable (each chain with its links)."""
        return {**asdict(self), "code_versions": self.code_versions}

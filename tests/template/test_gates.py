"""The gates a contributor runs, each alone: the Makefile's targets and the pure layers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _makefile() -> str:
    return (ROOT / "Makefile").read_text(encoding="utf-8")


def test_phony_lists_exactly_the_targets_the_makefile_defines() -> None:
    text = _makefile()
    phony = re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE)
    assert phony is not None
    defined = re.findall(r"^([a-zA-Z][a-zA-Z-]*(?: [a-zA-Z][a-zA-Z-]*)*):", text, re.MULTILINE)
    defined = [name for names in defined for name in names.split()]
    assert sorted(phony.group(1).split()) == sorted(defined)


def test_each_gate_has_a_target_of_its_own() -> None:
    defined = set(re.findall(r"^([a-z][a-z-]*):", _makefile(), re.MULTILINE))
    assert {"lint", "typecheck", "test-fast", "test", "lock", "demo", "bench"} <= defined


def test_the_pure_layers_collect_without_reaching_a_database() -> None:
    # A server nobody listens on: any attempt to reach it fails the run.
    env = {**os.environ, "DATABASE_URL": "host=/nonexistent-duly-socket-dir connect_timeout=1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/engine", "tests/planner", "--collect-only"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "database: DATABASE_URL" in done.stdout  # the header ran, and did not connect
    assert " collected" in done.stdout


def test_the_readme_and_docs_link_only_to_files_in_the_repository() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)", page.read_text(encoding="utf-8")):
            assert "://" not in target, f"{page.name} links outside the repository: {target}"
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{page.name} links outside: {target}"
            assert resolved.exists(), f"{page.name} links to a missing file: {target}"


def _pins(lock: Path) -> dict[str, str]:
    """``name: version`` of every requirement in a pip-compile lock, each with its hashes."""
    text = lock.read_text(encoding="utf-8")
    pins = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+) \\$", text, re.MULTILINE))
    requirements = [line for line in text.splitlines() if line and line[0] not in "# "]
    assert len(pins) == len(requirements), f"{lock.name}: a requirement without hashes"
    return {name.lower(): version for name, version in pins.items()}


def test_the_tests_run_against_the_very_pins_the_lambda_artifact_ships() -> None:
    lambda_pins = _pins(ROOT / "src" / "dispatch_fn" / "requirements.txt")
    dev_pins = _pins(ROOT / "requirements" / "dev.txt")
    assert {"psycopg", "pydantic", "tzdata", "aws-lambda-powertools"} <= set(lambda_pins)
    assert {name: dev_pins.get(name) for name in lambda_pins} == lambda_pins
    assert "pytest" in dev_pins
    assert "pytest" not in lambda_pins

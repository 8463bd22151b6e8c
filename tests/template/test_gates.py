"""The gates a contributor runs, each alone: the Makefile's targets and the pure layers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from folders import holding_tests, needs_database

ROOT = Path(__file__).resolve().parents[2]


def _makefile() -> str:
    return (ROOT / "Makefile").read_text(encoding="utf-8")


def test_phony_lists_exactly_the_targets_the_makefile_defines() -> None:
    text = _makefile()
    phony = re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE)
    assert phony is not None
    target = r"[a-zA-Z][a-zA-Z0-9-]*"
    defined = re.findall(rf"^({target}(?: {target})*):", text, re.MULTILINE)
    defined = [name for names in defined for name in names.split()]
    assert sorted(phony.group(1).split()) == sorted(defined)


def test_each_gate_has_a_target_of_its_own() -> None:
    defined = set(re.findall(r"^([a-z][a-z0-9-]*):", _makefile(), re.MULTILINE))
    assert {"lint", "typecheck", "test-fast", "test", "lock", "demo", "bench"} <= defined


def test_help_lists_every_target_with_what_it_does() -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    described = set(re.findall(r"^([a-z][a-z0-9-]*):.*## ", _makefile(), re.MULTILINE))
    assert listed == described
    assert {"help", "test", "bench", "fuzz", "soak"} <= listed


def test_every_benchmark_is_run_by_a_target() -> None:
    # A benchmark no target runs rots: its figures stop being reproducible.
    runner = (ROOT / "scripts" / "bench.sh").read_text(encoding="utf-8")
    benchmarks = {
        path.stem
        for path in (ROOT / "bench").glob("*.py")
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
    }
    benchmarks |= {"dispatch"}
    assert benchmarks, "no benchmark found"
    for name in sorted(benchmarks):
        assert f"-m bench.{name}" in runner, f"bench/{name} is run by no target"
    for mode in re.findall(r"^([a-z-]+)\)$", runner, re.MULTILINE):
        assert f"./scripts/bench.sh {mode}" in _makefile(), f"bench.sh {mode} has no target"


def test_every_script_is_reached_from_the_makefile() -> None:
    makefile = _makefile()
    scripts = (ROOT / "scripts").glob("*.sh")
    sourced = {"env.sh"}  # sourced by the others, never run alone
    called = " ".join(path.read_text(encoding="utf-8") for path in (ROOT / "scripts").glob("*.sh"))
    for script in sorted(scripts):
        if script.name in sourced:
            continue
        reached = f"scripts/{script.name}" in makefile or script.name in called
        assert reached, f"scripts/{script.name} is run by no target"


def test_the_database_free_folders_collect_without_reaching_a_database() -> None:
    # A server nobody listens on: any attempt to reach it fails the run.
    env = {**os.environ, "DATABASE_URL": "host=/nonexistent-duly-socket-dir connect_timeout=1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--database-free", "--collect-only"],
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
    collected = set(re.findall(r"^    <Dir ([a-z_]+)>$", done.stdout, re.MULTILINE))
    free = {folder.name for folder in holding_tests() if not needs_database(folder)}
    assert {"engine", "planning", "runner", "architecture"} <= free
    assert collected == free


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


def _cited_anchors(text: str) -> set[str]:
    return set(re.findall(r"docs/contract\.md#([a-z0-9-]+)", text))


def test_code_and_docs_cite_the_contract_in_the_repository_by_anchors_it_has() -> None:
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', contract))
    assert {"account", "set-aside", "exit-statuses"} <= anchors
    # Applied migrations are checksummed whole, comments included: their
    # text is history and stays as it was written.
    sources = [
        path
        for folder in ("src", "tests", "bench", "docs", "scripts")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".sql", ".md", ".sh"} and "migrations" not in path.parts
    ]
    outside = "SPEC " + "\u00a7"  # spelt apart, so this file does not cite it itself
    for path in [*sources, ROOT / "README.md", ROOT / "template.yaml"]:
        text = path.read_text(encoding="utf-8")
        assert outside not in text, f"{path.relative_to(ROOT)} cites a document outside the repo"
        missing = _cited_anchors(text) - anchors
        assert not missing, f"{path.relative_to(ROOT)} cites missing anchors {sorted(missing)}"


def _anchors(page: Path) -> set[str]:
    """The anchors a page of docs/ has: its ``<a id>`` tags and its headings' GitHub slugs."""
    text = page.read_text(encoding="utf-8")
    headings = re.findall(r"^#+ (.+)$", text, re.MULTILINE)
    slugs = {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}
    return set(re.findall(r'<a id="([a-z0-9-]+)"></a>', text)) | slugs


def test_code_and_docs_cite_the_performance_pages_by_anchors_they_have() -> None:
    pages = {name: ROOT / "docs" / name for name in ("performance.md", "performance-history.md")}
    anchors = {name: _anchors(page) for name, page in pages.items()}
    assert {"goals", "current-record", "what-make-bench-measures"} <= anchors["performance.md"]
    sources = [
        path
        for folder in ("src", "tests", "bench", "docs", "scripts")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".sql", ".md", ".sh"} and "migrations" not in path.parts
    ]
    for name, page in pages.items():
        within = set(re.findall(r"\]\(#([a-z0-9-]+)\)", page.read_text(encoding="utf-8")))
        assert not within - anchors[name], f"{name} links to {sorted(within - anchors[name])}"
    cited = 0
    for path in [*sources, ROOT / "README.md", ROOT / "template.yaml", ROOT / "Makefile"]:
        text = path.read_text(encoding="utf-8")
        for name, anchor in re.findall(r"(performance(?:-history)?\.md)#([a-z0-9-]+)", text):
            cited += 1
            assert anchor in anchors[name], f"{path.relative_to(ROOT)} cites {name}#{anchor}"
    assert cited > 10


def test_the_performance_page_reads_as_the_present_in_at_most_300_lines() -> None:
    # Issue 39: the goals, one record, how to run each bench and what limits
    # the dispatcher now; the history lives in performance-history.md.
    lines = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"docs/performance.md has {len(lines)} lines; at most 300"

"""The README's "where a change goes" map names files that exist, and every page statement.

The map names files relative to ``src/dispatch_fn`` (``run/dispatch.py``,
``db/statements/page_owed.sql``), or a statement or migration by its file name
alone (``page_write.sql``, ``0012_duty_account.sql``). A file renamed or
removed, or a page statement added that the map does not name, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "dispatch_fn"
STATEMENTS = PACKAGE / "db" / "statements"
MIGRATIONS = PACKAGE / "db" / "migrations"


def _change_map() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("Where a change goes:")
    return readme[start : readme.index("\n## ", start)]


def _named_files() -> set[str]:
    """Every backquoted name in the map that is a path or a file: ``x/y.py``, ``z.sql``, ``d/``."""
    quoted = re.findall(r"`([^`\s]+)`", _change_map())
    return {name for name in quoted if "/" in name or name.endswith((".py", ".sql"))}


def _resolve(name: str) -> Path | None:
    candidates = [PACKAGE / name] if "/" in name else [STATEMENTS / name, MIGRATIONS / name]
    return next((path for path in candidates if path.exists()), None)


def test_the_map_names_files() -> None:
    named = _named_files()
    assert {"planning/plan.py", "db/store.py", "page_write_rerun.sql"} <= named


def test_every_file_the_map_names_exists() -> None:
    missing = sorted(name for name in _named_files() if _resolve(name) is None)
    assert not missing, f"README.md's change map names files that do not exist: {missing}"


def test_the_map_names_every_page_statement() -> None:
    named = {Path(name).name for name in _named_files()}
    pages = sorted(path.name for path in STATEMENTS.glob("page_*.sql"))
    assert pages, f"no page statement found in {STATEMENTS}"
    unnamed = [page for page in pages if page not in named]
    assert not unnamed, f"README.md's change map names no entry for {unnamed}"

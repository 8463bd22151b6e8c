"""The package's layers, and which way their imports point.

From the bottom up: ``engine`` (periods), ``planning`` (what a run owes),
``db`` (PostgreSQL), ``run`` (one run), ``aws`` (what AWS calls), ``cli``
(the command line). A layer imports only those below it; ``errors``,
``settings`` and ``bounded`` stand beside them all and import no layer. A
module whose name starts with ``_`` is private to its package: no other
package imports it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "dispatch_fn"
LAYERS = ("engine", "planning", "db", "run", "aws", "cli")
SHARED = frozenset({"errors", "settings", "bounded"})


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        yield ".".join(("dispatch_fn", *parts)).removesuffix(".__init__"), path


def _imported(path: Path) -> Iterator[str]:
    """Every dispatch_fn module ``path`` imports, at any depth, type-checking ones included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("dispatch_fn"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dispatch_fn"):
            module = node.module or ""
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                file = (PACKAGE.parent / candidate.replace(".", "/")).with_suffix(".py")
                yield candidate if file.exists() else module


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else None


def _edges() -> list[tuple[str, str]]:
    return [(module, target) for module, path in _modules() for target in _imported(path)]


def test_every_module_sits_in_a_layer_or_beside_them() -> None:
    beside = SHARED | {"__main__"}
    loose = [
        module
        for module, _ in _modules()
        if _layer(module) is None
        and module != "dispatch_fn"
        and module.removeprefix("dispatch_fn.") not in {*LAYERS, *beside}
    ]
    assert not loose, f"modules outside every layer: {loose}"


def test_a_layer_imports_only_the_layers_below_it() -> None:
    upward = [
        f"{module} -> {target}"
        for module, target in _edges()
        if (here := _layer(module)) is not None
        and (there := _layer(target)) is not None
        and LAYERS.index(there) > LAYERS.index(here)
    ]
    assert not upward, "imports that point up:\n" + "\n".join(upward)


def test_the_modules_beside_the_layers_import_no_layer() -> None:
    reaching = [
        f"{module} -> {target}"
        for module, target in _edges()
        if module.removeprefix("dispatch_fn.") in SHARED and _layer(target) is not None
    ]
    assert not reaching, "\n".join(reaching)


def test_a_private_module_is_imported_only_inside_its_own_package() -> None:
    reached = [
        f"{module} -> {target}"
        for module, target in _edges()
        if target.rsplit(".", 1)[-1].startswith("_")
        and not target.endswith("__init__")
        and target.rsplit(".", 1)[0] != module.rsplit(".", 1)[0]
    ]
    assert not reached, "private modules imported from outside:\n" + "\n".join(reached)


# What runs SQL on a psycopg connection or cursor: only the data layer calls these.
_EXECUTING: Final = frozenset({"execute", "executemany", "copy", "cursor"})


def _executing_calls(path: Path) -> Iterator[str]:
    """Every call of a method named as one that runs SQL, as ``line: name``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _EXECUTING
        ):
            yield f"{node.lineno}: .{node.func.attr}(...)"


def test_only_the_data_layer_executes_sql() -> None:
    outside = [
        f"{module}:{call}"
        for module, path in _modules()
        if _layer(module) != "db"
        for call in _executing_calls(path)
    ]
    assert not outside, "SQL run outside dispatch_fn.db:\n" + "\n".join(outside)
    # The check sees what it judges: the data layer's own calls.
    assert list(_executing_calls(PACKAGE / "db" / "store.py"))


def test_the_rules_above_see_the_imports_they_judge() -> None:
    # A parser that found nothing would pass every rule above.
    edges = _edges()
    assert ("dispatch_fn.run.dispatch", "dispatch_fn.db.store") in edges
    assert ("dispatch_fn.engine.periods", "dispatch_fn.engine._keys") in edges
    assert ("dispatch_fn.cli.main", "dispatch_fn.cli.invoke") in edges


def _modules_after_importing(module: str) -> set[str]:
    # A fresh interpreter: this one has imported everything already.
    probe = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(completed.stdout))


@pytest.mark.parametrize("module", ["dispatch_fn.aws.events", "dispatch_fn.settings"])
def test_parsing_events_and_reading_settings_load_no_database_driver_and_no_run_loop(
    module: str,
) -> None:
    loaded = _modules_after_importing(module)
    assert "psycopg" not in loaded
    assert not {name for name in loaded if name.startswith(("dispatch_fn.run", "dispatch_fn.db"))}


def test_the_run_loop_loads_no_event_parser_and_no_holiday_tables() -> None:
    # The Lambda loads the parser anyway; a run made from the CLI, the bench or
    # a test does not need it, and a run without calendars needs no holidays.
    loaded = _modules_after_importing("dispatch_fn.run.dispatch")
    assert "pydantic" not in loaded
    assert "dispatch_fn.aws.events" not in loaded
    assert "holidays" not in loaded


@pytest.mark.parametrize("module", ["dispatch_fn.db.database", "dispatch_fn.db.migrate"])
def test_connections_and_migrations_load_neither_the_data_layer_nor_the_planner(
    module: str,
) -> None:
    loaded = _modules_after_importing(module)
    assert {"dispatch_fn.db.store", "dispatch_fn.planning.plan"}.isdisjoint(loaded)
    assert not {name for name in loaded if name.startswith("dispatch_fn.run")}

"""The package's layers, which way their imports point, and the face each one shows.

From the bottom up: ``engine`` (periods), ``planning`` (what a run owes),
``db`` (PostgreSQL), ``run`` (one run), ``aws`` (what AWS calls), ``cli``
(the command line). A layer imports only those below it; ``errors``,
``settings``, ``bounded`` and ``faces`` stand beside them all and import no layer. A
module whose name starts with ``_`` is private to its package: no other
package imports it. Each layer's ``__init__`` is its face: its ``__all__``
names what other packages use, and they import it from there. Only ``db``
executes SQL; the exceptions live in ``errors`` (and the run layer's, which
carries a run's outcome, in ``run.errors``).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "dispatch_fn"
LAYERS = ("engine", "planning", "db", "run", "aws", "cli")
SHARED = frozenset({"errors", "settings", "bounded", "faces"})


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


def _package(module: str) -> str:
    """The package ``module`` belongs to: a package's face belongs to the package itself."""
    is_face = (PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file()
    return module if is_face else module.rsplit(".", 1)[0]


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
        and target.rsplit(".", 1)[0] != _package(module)
    ]
    assert not reached, "private modules imported from outside:\n" + "\n".join(reached)


# What runs SQL on a psycopg connection or cursor: only the data layer calls these.
_EXECUTING: Final = frozenset({"execute", "executemany", "copy", "cursor"})


def _executes(call: ast.Attribute) -> bool:
    return call.attr in _EXECUTING


def _opens(call: ast.Attribute) -> bool:
    # psycopg.connect(...), psycopg.Connection.connect(...): the driver opens a connection.
    return call.attr == "connect" and "psycopg" in ast.unparse(call.value)


def _calls(path: Path, kind: Callable[[ast.Attribute], bool]) -> Iterator[str]:
    """Every method call of ``kind`` in ``path``, as ``line: name(...)``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and kind(node.func):
            yield f"{node.lineno}: {ast.unparse(node.func)}(...)"


@pytest.mark.parametrize(
    ("kind", "what", "seen_in"),
    [(_executes, "SQL run", "store.py"), (_opens, "connections opened", "database.py")],
    ids=["executes SQL", "opens connections"],
)
def test_only_the_data_layer_talks_to_the_driver(
    kind: Callable[[ast.Attribute], bool], what: str, seen_in: str
) -> None:
    outside = [
        f"{module}:{call}"
        for module, path in _modules()
        if _layer(module) != "db"
        for call in _calls(path, kind)
    ]
    assert not outside, f"{what} outside dispatch_fn.db:\n" + "\n".join(outside)
    # The check sees what it judges: the data layer's own calls.
    assert list(_calls(PACKAGE / "db" / seen_in, kind))


def _imports(path: Path) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Every dispatch_fn import of ``path``: the module named, and the names taken from it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dispatch_fn"):
                    yield alias.name, ()
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dispatch_fn"):
            yield node.module or "", tuple(alias.name for alias in node.names)


def _face(layer: str) -> list[str]:
    names: list[str] = importlib.import_module(f"dispatch_fn.{layer}").__all__
    return names


def test_other_packages_import_a_layer_through_its_face() -> None:
    # ``from dispatch_fn.run import dispatch``, never ``from dispatch_fn.run._dispatch import``.
    faces = {layer: set(_face(layer)) for layer in LAYERS}
    around = [
        f"{module}: from {imported} import {', '.join(names) or '(the module)'}"
        for module, path in _modules()
        for imported, names in _imports(path)
        if (there := imported.split(".")[1] if imported.count(".") else None) in faces
        and _package(module).split(".")[:2] != ["dispatch_fn", there]
        and (imported != f"dispatch_fn.{there}" or not set(names) <= faces[there])
    ]
    assert not around, "imports past a layer's face:\n" + "\n".join(around)


@pytest.mark.parametrize("layer", LAYERS)
def test_a_face_names_each_of_its_names_once_and_every_one_resolves(layer: str) -> None:
    package = importlib.import_module(f"dispatch_fn.{layer}")
    names = _face(layer)
    assert names == sorted(set(names), key=names.index), "a name listed twice"
    for name in names:
        value = getattr(package, name)
        submodule = (PACKAGE / layer / f"{name}.py").is_file()
        if hasattr(package, "_HOME"):
            # A face that loads on first use finds a loaded submodule before its own
            # name: a namespace is its module, and no other name is a module's namesake.
            assert isinstance(value, types.ModuleType) == submodule, name
        assert not isinstance(value, types.ModuleType) or value.__name__.endswith(f".{name}")


@pytest.mark.parametrize("layer", ["db", "run", "aws", "cli"])
def test_a_face_that_loads_on_first_use_says_where_each_name_lives(layer: str) -> None:
    # The face imports its names for the type checker and loads them from _HOME at run time:
    # the two must agree, name by name.
    package = importlib.import_module(f"dispatch_fn.{layer}")
    path = PACKAGE / layer / "__init__.py"
    checked = {
        name: imported.removeprefix(f"dispatch_fn.{layer}").removeprefix(".") or None
        for imported, names in _imports(path)
        if imported.startswith(f"dispatch_fn.{layer}")
        for name in names
    }
    homes = {name: None if home is None else home for name, home in package._HOME.items()}
    assert checked == homes
    assert set(homes) == set(_face(layer))


def test_no_module_re_exports_a_name_under_its_own_alias() -> None:
    # ``from x import y as y`` (or ``import x as x``) re-exports for callers; a face names them.
    aliased = [
        f"{module}: {alias.name}"
        for module, path in _modules()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if alias.asname is not None and alias.asname == alias.name.rsplit(".", 1)[-1]
    ]
    assert not aliased, "\n".join(aliased)


def test_no_module_hands_on_another_s_name_by_assigning_it() -> None:
    # ``FREQUENCIES = _keys.FREQUENCIES`` is a re-export too: the face imports the name.
    handed_on = [
        f"{module}: {node.targets[0].id}"
        for module, path in _modules()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == node.targets[0].id
    ]
    assert not handed_on, "\n".join(handed_on)


def test_only_a_face_lists_names_it_does_not_define() -> None:
    # A module's own __all__ (the contract's ``periods``) lists what it defines.
    borrowed = []
    for module, path in _modules():
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        listed: list[str] = next(
            (
                ast.literal_eval(node.value)
                for node in tree.body
                if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            ),
            [],
        )
        imported = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        borrowed += [f"{module}: {name}" for name in listed if name in imported]
    assert not borrowed, "\n".join(borrowed)


def _top_level_names(path: Path) -> Iterator[str]:
    """Functions, classes and type aliases (``type X = ...``, or ``X = Callable[...]``)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.TypeAlias) and isinstance(node.name, ast.Name):
            yield node.name.id
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Subscript)
            and node.targets[0].id[:1].isupper()
            and not node.targets[0].id.isupper()
        ):
            yield node.targets[0].id


def test_no_two_modules_of_the_run_layer_give_one_name_to_two_things() -> None:
    homes: dict[str, list[str]] = {}
    for module, path in _modules():
        if _layer(module) == "run" and path.name != "__init__.py":
            for name in _top_level_names(path):
                homes.setdefault(name, []).append(module)
    shared = {name: where for name, where in homes.items() if len(where) > 1}
    assert not shared, shared


def test_the_exceptions_live_in_the_errors_modules() -> None:
    homes = {"dispatch_fn.errors", "dispatch_fn.run.errors"}
    elsewhere = []
    for module, _ in _modules():
        if module.endswith("__main__"):
            continue
        loaded = importlib.import_module(module)
        elsewhere += [
            f"{module}.{name}"
            for name, value in vars(loaded).items()
            if isinstance(value, type)
            and issubclass(value, BaseException)
            and value.__module__ == module
            and module not in homes
        ]
    assert not elsewhere, elsewhere


def test_the_rules_above_see_the_imports_they_judge() -> None:
    # A parser that found nothing would pass every rule above.
    edges = _edges()
    assert ("dispatch_fn.run._dispatch", "dispatch_fn.db") in edges
    assert ("dispatch_fn.engine.periods", "dispatch_fn.engine._keys") in edges
    assert ("dispatch_fn.cli.commands", "dispatch_fn.cli.invoke") in edges


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
    loaded = _modules_after_importing("dispatch_fn.run._dispatch")
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


def test_the_embedded_database_loads_neither_the_command_line_nor_the_data_layer() -> None:
    # The bench's children and the tests start it; what they load counts in their RSS.
    loaded = _modules_after_importing("dispatch_fn.cli.embedded")
    assert {"dispatch_fn.cli.commands", "dispatch_fn.db.store"}.isdisjoint(loaded)

"""The test suite's own rules: each folder says whether it needs a database, no test swaps a global.

Each folder of tests/ sets ``NEEDS_DATABASE`` in its conftest.py
(``folders``). The root conftest refuses, at collection, a test in a
database-free folder that asks for a database, however deep in its fixtures;
these check what can be read without collecting: the declarations
themselves, and that a database-free folder's modules import neither the
driver nor the root conftest that provisions servers. A dependency a test
changes is passed in (a ``Runtime`` field, a keyword argument, the
environment), never swapped on a module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from folders import TESTS, UndeclaredFolderError, holding_tests, needs_database

# What reaching a database takes: the driver, or the fixtures' module.
_DATABASE_MODULES = ("psycopg", "conftest")


def _imports(module: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_every_folder_of_tests_says_whether_it_needs_a_database() -> None:
    folders = holding_tests()
    assert {folder.name for folder in folders} >= {"engine", "planning", "db", "run", "aws"}
    undeclared = []
    for folder in folders:
        try:
            needs_database(folder)
        except UndeclaredFolderError as missing:
            undeclared.append(str(missing))
    assert not undeclared


def test_the_declaration_is_read_as_written(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('"""A folder."""\n\nNEEDS_DATABASE = False\n')
    assert needs_database(tmp_path) is False
    (tmp_path / "conftest.py").write_text("NEEDS_DATABASE: bool = True\n")
    assert needs_database(tmp_path) is True
    for wrong in ("NEEDS_DATABASE = 'no'\n", "NEEDS_DATABASE = bool(0)\n", '"""Nothing."""\n'):
        (tmp_path / "conftest.py").write_text(wrong)
        with pytest.raises(UndeclaredFolderError, match="NEEDS_DATABASE"):
            needs_database(tmp_path)
    (tmp_path / "conftest.py").unlink()
    with pytest.raises(UndeclaredFolderError, match="missing"):
        needs_database(tmp_path)


@pytest.mark.parametrize(
    "folder",
    [folder for folder in holding_tests() if not needs_database(folder)],
    ids=lambda folder: folder.name,
)
def test_a_database_free_folder_imports_no_driver_and_no_database_fixtures(folder: Path) -> None:
    reaching = {
        f"{module.name}: {name}"
        for module in sorted(folder.rglob("*.py"))
        for name in _imports(module)
        if name.split(".")[0] in _DATABASE_MODULES
    }
    assert not reaching, f"tests/{folder.name} says NEEDS_DATABASE = False: {sorted(reaching)}"


def test_no_test_swaps_a_module_global() -> None:
    # monkeypatch.setenv and delenv change the environment, which is fine;
    # setattr, setitem on a module's dict, and mock.patch swap what others share.
    swapping = re.compile(r"\.setattr\(|\.setitem\(|mock\.patch|from unittest import mock")
    found = [
        f"{path.relative_to(TESTS)}:{number}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if swapping.search(line) and path.name != Path(__file__).name
    ]
    advice = "pass the dependency in instead (a Runtime field, an argument)"
    assert not found, advice + ":\n" + "\n".join(found)


_SOURCE = TESTS.parent / "src"


def _module_names(tree: ast.Module) -> set[str]:
    """Names a test binds to modules: ``import x``, ``from dispatch_fn.x import m``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            folder = _SOURCE.joinpath(*node.module.split("."))
            names |= {
                alias.asname or alias.name
                for alias in node.names
                if (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir()
            }
    return names


def test_no_test_assigns_to_a_module_s_attribute() -> None:
    # ``boto3.DEFAULT_SESSION = None`` swaps what every later test shares, as setattr does.
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = _module_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [
                f"{path.relative_to(TESTS)}:{node.lineno}"
                for target in targets
                if isinstance(target, ast.Attribute)
                and isinstance(base := _base(target), ast.Name)
                and base.id in modules
            ]
    assert not found, "pass the dependency in instead (a session, an argument):\n" + "\n".join(
        found
    )


def _base(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node

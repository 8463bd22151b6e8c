"""What each folder of tests/ says it needs: the ``NEEDS_DATABASE`` of its conftest.py.

Every folder that holds tests has a conftest.py whose ``NEEDS_DATABASE`` is
``True`` or ``False``, written as a literal, so it can be read without
importing anything. ``False`` is a promise that the root conftest holds at
collection (a test there that asks for a database is refused) and that
``make test-fast`` (``pytest --database-free``) relies on: it runs exactly
those folders, with no server at all.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

TESTS: Final = Path(__file__).resolve().parent
DECLARATION: Final = "NEEDS_DATABASE"


class UndeclaredFolderError(LookupError):
    """A folder of tests/ whose conftest.py does not say whether it needs a database."""


def holding_tests() -> list[Path]:
    """The folders directly under tests/ that hold test modules."""
    return sorted(
        folder for folder in TESTS.iterdir() if folder.is_dir() and any(folder.glob("test_*.py"))
    )


def needs_database(folder: Path) -> bool:
    """What ``folder``'s conftest.py declares; raises ``UndeclaredFolderError`` if it does not."""
    conftest = folder / "conftest.py"
    where = f"tests/{folder.name}/conftest.py"
    if not conftest.is_file():
        raise UndeclaredFolderError(
            f"{where} is missing; it must set {DECLARATION} = True or False"
        )
    for node in ast.parse(conftest.read_text(encoding="utf-8")).body:
        value: ast.expr | None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == DECLARATION:
            if isinstance(value, ast.Constant) and isinstance(value.value, bool):
                return value.value
            raise UndeclaredFolderError(f"{where}: {DECLARATION} must be the literal True or False")
    raise UndeclaredFolderError(f"{where} does not set {DECLARATION} = True or False")


def folder_of(path: Path) -> Path | None:
    """The folder directly under tests/ that ``path`` is or lies in; None for anything else."""
    resolved = path.resolve()
    if not resolved.is_relative_to(TESTS) or resolved == TESTS:
        return None
    folder = TESTS / resolved.relative_to(TESTS).parts[0]
    return folder if folder.is_dir() else None

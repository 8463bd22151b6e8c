"""What we deploy works: the built handlers, in a fresh interpreter, on a real database.

Each function's artifact is the package alone; its dependencies are the one
layer both share, which Lambda puts on ``sys.path`` after the function's own
directory (``/var/task``, then ``/opt/python``). The probes do the same.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from samtranslator.yaml_helper import yaml_parse

from support import CLOCK, duty, insert_duties, task_count

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "src" / "dispatch_fn"
BUILT = ROOT / ".aws-sam" / "build" / "DispatchFunction"
LAYER = ROOT / ".aws-sam" / "build" / "DependenciesLayer" / "python"

# Runs inside the artifact directory the way Lambda does: the directory, then the
# layer, on sys.path, the handler imported by the template's Handler string,
# nothing from the source tree or the development environment importable.
_PROBE = """
import importlib, json, sys
sys.path[:0] = [".", sys.argv[3]]
module_name, _, function = sys.argv[2].rpartition(".")
module = importlib.import_module(module_name)
report = getattr(module, function)(json.loads(sys.argv[1]), None)
print(json.dumps({"report": report, "app": module.__file__,
                  "package": sys.modules["dispatch_fn"].__file__,
                  "psycopg": sys.modules["psycopg"].__file__}))
"""


def _cli_only() -> list[str]:
    """scripts/cli_only.txt: what the build leaves out, relative to the package."""
    lines = (ROOT / "scripts" / "cli_only.txt").read_text("utf-8").splitlines()
    return [line.rstrip("/") for line in lines if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def built() -> Path:
    """The sam build output; scripts/test.sh builds it before pytest, or we build it here."""
    if not (BUILT / "dispatch_fn" / "aws" / "app.py").is_file() or not LAYER.is_dir():
        subprocess.run([str(ROOT / "scripts" / "template_gates.sh")], check=True, cwd=ROOT)
    return BUILT


def _handler() -> str:
    template = yaml_parse((ROOT / "template.yaml").read_text("utf-8"))
    handler: str = template["Resources"]["DispatchFunction"]["Properties"]["Handler"]
    return handler


def _base_python() -> str:
    # The interpreter the venv was made from: it has none of the venv's packages.
    return str(getattr(sys, "_base_executable", sys.executable))


def test_the_built_handler_runs_a_dry_run_against_the_database(
    built: Path, conn: psycopg.Connection[Any], db_url: str
) -> None:
    insert_duties(conn, [duty("d1"), duty("d2", frequency="weekly")])
    event = {
        "from": "2026-01-01",
        "to": "2026-03-31",
        "now": CLOCK,
        "dry_run": True,
    }
    env = {
        "PATH": os.environ["PATH"],
        "DATABASE_URL": db_url,
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    completed = subprocess.run(
        [_base_python(), "-I", "-S", "-c", _PROBE, json.dumps(event), _handler(), str(LAYER)],
        cwd=built,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    for module in ("app", "package"):
        assert Path(result[module]).resolve().is_relative_to(built.resolve()), module
    assert Path(result["psycopg"]).resolve().is_relative_to(LAYER.resolve())
    assert result["report"]["dry_run"] is True
    assert result["report"]["tasks_created"] == 3 + 14  # January-March, ISO weeks 2026-W01..W14
    assert task_count(conn) == 0


def test_the_layer_carries_the_pinned_dependencies_and_no_development_ones(built: Path) -> None:
    pinned = {
        line.split("==")[0].split("[")[0].lower().replace("_", "-"): line.split("==")[1].split()[0]
        for line in (PACKAGE / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith(("#", " "))
    }
    installed = {}
    for dist in LAYER.glob("*.dist-info"):
        name, _, version = dist.name.removesuffix(".dist-info").rpartition("-")
        installed[name.lower().replace("_", "-")] = version
    assert {name: installed.get(name) for name in pinned} == pinned
    for development_only in ("pgserver", "pytest", "moto", "hypothesis", "mypy"):
        assert development_only not in installed


def test_each_function_carries_the_package_alone_and_leaves_the_dependencies_to_the_layer(
    built: Path,
) -> None:
    for function in (built, built.parent / "MigrationFunction"):
        assert sorted(entry.name for entry in function.iterdir()) == ["dispatch_fn"], function
        assert not (function / "dispatch_fn" / "requirements.txt").exists()
    template = yaml_parse((ROOT / "template.yaml").read_text("utf-8"))["Resources"]
    for name in ("DispatchFunction", "MigrationFunction"):
        assert template[name]["Properties"]["Layers"] == [{"Ref": "DependenciesLayer"}], name


def test_the_artifact_holds_the_package_as_imported_everywhere_without_the_cli_modules(
    built: Path,
) -> None:
    assert _handler() == "dispatch_fn.aws.app.lambda_handler"
    package = built / "dispatch_fn"
    assert (package / "aws" / "app.py").is_file()
    assert not (built / "app.py").exists()  # no top-level module, no import trick
    for cli_only in _cli_only():
        assert (PACKAGE / cli_only).exists(), f"scripts/cli_only.txt names a missing {cli_only}"
        assert not (package / cli_only).exists(), cli_only
    # Everything else the package holds is there.
    shipped = {path.relative_to(package) for path in package.rglob("*.py")}
    source = {
        path.relative_to(PACKAGE)
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts and not _is_cli_only(path.relative_to(PACKAGE))
    }
    assert shipped == source


def _is_cli_only(relative: Path) -> bool:
    return any(relative == Path(entry) or Path(entry) in relative.parents for entry in _cli_only())


def _imported(path: Path) -> set[str]:
    """Every dispatch_fn module a source file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level]
                base = ".".join([*parent, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == "dispatch_fn"}


def _module_file(name: str) -> Path | None:
    candidate = PACKAGE.parent.joinpath(*name.split("."))
    for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if path.is_file():
            return path
    return None  # a name imported from a module, not a module


def _import_closure(module: str) -> set[Path]:
    seen: set[Path] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            path = _module_file(".".join(parts[:depth]))
            if path is not None and path not in seen:
                seen.add(path)
                pending.extend(_imported(path))
    return seen


@pytest.mark.parametrize(
    ("handler_module", "reached"),
    [
        ("dispatch_fn.aws.app", "aws/invocation.py"),
        ("dispatch_fn.aws.migrate_resource", "db/migrate.py"),
    ],
)
def test_no_handler_imports_a_module_only_the_command_line_needs(
    handler_module: str, reached: str
) -> None:
    closure = {path.relative_to(PACKAGE) for path in _import_closure(handler_module)}
    assert Path(reached) in closure
    assert sorted(str(path) for path in closure if _is_cli_only(path)) == []


def test_the_command_line_modules_are_found_by_the_same_closure() -> None:
    # The closure the handlers are checked with does reach them, from the CLI.
    closure = {path.relative_to(PACKAGE) for path in _import_closure("dispatch_fn.__main__")}
    assert {Path("__main__.py"), Path("cli/commands.py"), Path("cli/invoke.py")} <= closure
    assert all(any(_is_cli_only(path) for path in closure) for _ in _cli_only())


def test_every_module_ships_with_bytecode_the_runtime_uses_unchecked(built: Path) -> None:
    for root in (built, built.parent / "MigrationFunction", LAYER):
        sources = [path for path in root.rglob("*.py") if "__pycache__" not in path.parts]
        assert sources, root
        for source in sources:
            # The name Python 3.12 looks for without -O (the runtime's optimisation level 0).
            compiled = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
            header = compiled.read_bytes()[:8]
            assert header[:4] == importlib.util.MAGIC_NUMBER, compiled
            # PEP 552 flags: hash-based (bit 0), not checked against the source (bit 1).
            assert int.from_bytes(header[4:8], "little") == 0b01, compiled


# Every calendar the holidays package defines, a few years of each: dates and weekend.
_CALENDARS_PROBE = """
import json, sys, warnings
sys.path[:0] = sys.argv[1:]
import holidays
warnings.simplefilter("ignore")
calendars = {}
for country, subdivisions in sorted(holidays.list_supported_countries().items()):
    for subdivision in [None, *subdivisions]:
        days = holidays.country_holidays(country, subdiv=subdivision, years=range(2025, 2028))
        calendars[f"{country}-{subdivision}"] = [sorted(map(str, days)), sorted(days.weekend)]
print(json.dumps({"file": holidays.__file__, "calendars": calendars}))
"""


def test_the_layers_holidays_without_translations_give_every_calendars_dates_unchanged(
    built: Path,
) -> None:
    # The names' translations are left out of the layer; the development
    # environment's holidays has them, and Lambda's locale selects English ones.
    import holidays  # noqa: PLC0415 - only to find the development copy

    assert (Path(holidays.__file__).parent / "locale").is_dir()
    assert not (LAYER / "holidays" / "locale").exists()
    env = {"PATH": os.environ["PATH"], "LANG": "en_US.UTF-8"}
    answers = []
    for interpreter, path in ((_base_python(), [str(LAYER)]), (sys.executable, [])):
        completed = subprocess.run(
            [interpreter, "-I", "-c", _CALENDARS_PROBE, *path],
            env=env, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr
        answers.append(json.loads(completed.stdout))
    from_layer, from_development = answers
    assert Path(from_layer["file"]).is_relative_to(LAYER)
    assert Path(from_development["file"]) == Path(holidays.__file__)
    assert len(from_layer["calendars"]) > 100
    assert from_layer["calendars"] == from_development["calendars"]


# The migration step's handler module, loaded as Lambda loads it, answering a
# CloudFormation Update; the response it would PUT is printed instead.
_MIGRATION_PROBE = """
import json, sys
sys.path[:0] = [".", sys.argv[3]]
from dispatch_fn.aws import migrate_resource
import psycopg
sent = []
migrate_resource.handle(
    json.loads(sys.argv[1]),
    connect=lambda: psycopg.connect(sys.argv[2], autocommit=True),
    send=lambda url, response: sent.append(response),
)
print(json.dumps({"response": sent[0], "module": migrate_resource.__file__}))
"""


def test_the_built_migration_step_answers_cloudformation_against_the_database(
    built: Path, db_url: str, server_dsn: str
) -> None:
    artifact = BUILT.parent / "MigrationFunction"
    assert (artifact / "dispatch_fn" / "aws" / "migrate_resource.py").is_file()
    migrations = artifact / "dispatch_fn" / "db" / "migrations"
    assert sorted(p.name for p in migrations.glob("*.sql")) == sorted(
        p.name for p in (ROOT / "src" / "dispatch_fn" / "db" / "migrations").glob("*.sql")
    )
    login = "duly_dispatch_built_probe"
    event = {
        "RequestType": "Update",
        "ResponseURL": "https://duly-test.s3.eu-west-1.amazonaws.com/r?X-Amz-Signature=0",
        "StackId": "stack",
        "RequestId": "req",
        "LogicalResourceId": "SchemaMigration",
        "PhysicalResourceId": "duly-schema",
        "ResourceProperties": {"DispatcherAuth": "iam", "DispatcherUser": login},
    }
    completed = subprocess.run(
        [_base_python(), "-I", "-S", "-c", _MIGRATION_PROBE, json.dumps(event), db_url, str(LAYER)],
        cwd=artifact,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {login}")
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert Path(result["module"]).resolve().is_relative_to(artifact.resolve())
    assert result["response"]["Status"] == "SUCCESS", result["response"]["Reason"]
    assert result["response"]["Reason"] == "schema is up to date"

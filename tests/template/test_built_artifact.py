"""What we deploy works: the built handler, in a fresh interpreter, on a real database."""

from __future__ import annotations

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
BUILT = ROOT / ".aws-sam" / "build" / "DispatchFunction"

# Runs inside the artifact directory the way Lambda does: the directory on
# sys.path, the handler imported by the template's Handler string, nothing
# from the source tree or the development environment importable.
_PROBE = """
import importlib, json, sys
sys.path.insert(0, ".")
module_name, _, function = sys.argv[2].rpartition(".")
module = importlib.import_module(module_name)
report = getattr(module, function)(json.loads(sys.argv[1]), None)
print(json.dumps({"report": report, "app": module.__file__,
                  "package": sys.modules["dispatch_fn"].__file__,
                  "psycopg": sys.modules["psycopg"].__file__}))
"""
# Only `python -m dispatch_fn` needs these; the function never imports them.
CLI_ONLY = ("__main__.py", "demo.py", "embedded.py")


@pytest.fixture(scope="module")
def built() -> Path:
    """The sam build output; scripts/test.sh builds it before pytest, or we build it here."""
    if not (BUILT / "dispatch_fn" / "app.py").is_file():
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
        [_base_python(), "-I", "-S", "-c", _PROBE, json.dumps(event), _handler()],
        cwd=built,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    for module in ("app", "package", "psycopg"):
        assert Path(result[module]).resolve().is_relative_to(built.resolve()), module
    assert result["report"]["dry_run"] is True
    assert result["report"]["tasks_created"] == 3 + 14  # January-March, ISO weeks 2026-W01..W14
    assert task_count(conn) == 0


def test_the_artifact_carries_the_pinned_dependencies_and_no_development_ones(built: Path) -> None:
    pinned = {
        line.split("==")[0].split("[")[0].lower().replace("_", "-"): line.split("==")[1].split()[0]
        for line in (ROOT / "src" / "dispatch_fn" / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith(("#", " "))
    }
    installed = {}
    for dist in built.glob("*.dist-info"):
        name, _, version = dist.name.removesuffix(".dist-info").rpartition("-")
        installed[name.lower().replace("_", "-")] = version
    assert {name: installed.get(name) for name in pinned} == pinned
    for development_only in ("pgserver", "pytest", "moto", "hypothesis", "mypy"):
        assert development_only not in installed


def test_the_artifact_holds_the_package_as_imported_everywhere_without_the_cli_modules(
    built: Path,
) -> None:
    assert _handler() == "dispatch_fn.app.lambda_handler"
    package = built / "dispatch_fn"
    assert (package / "app.py").is_file()
    assert not (built / "app.py").exists()  # no top-level module, no import trick
    for cli_only in CLI_ONLY:
        assert not (package / cli_only).exists(), cli_only
    # What the function does import is all there.
    for module in ("invocation.py", "events.py", "dispatch.py", "store.py", "database.py"):
        assert (package / module).is_file(), module


# The migration step's handler module, loaded as Lambda loads it, answering a
# CloudFormation Update; the response it would PUT is printed instead.
_MIGRATION_PROBE = """
import json, sys
sys.path.insert(0, ".")
from dispatch_fn import migrate_resource
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
    assert (artifact / "dispatch_fn" / "migrate_resource.py").is_file()
    migrations = artifact / "dispatch_fn" / "migrations"
    assert sorted(p.name for p in migrations.glob("*.sql")) == sorted(
        p.name for p in (ROOT / "src" / "dispatch_fn" / "migrations").glob("*.sql")
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
        [_base_python(), "-I", "-S", "-c", _MIGRATION_PROBE, json.dumps(event), db_url],
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

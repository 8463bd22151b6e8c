"""``make build`` and ``make deploy``: the pinned SAM CLI, the right arguments, the CA bundle first.

Each test runs the Makefile's target in a copy of the files it uses, with
``DRY_RUN=1``: the script prints the sam commands it would run, so what reaches
sam is seen without an AWS account.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The Makefile, the scripts, samconfig.toml and the certs directory, as a clone has them."""
    for name in ("Makefile", "samconfig.toml", "scripts/env.sh", "scripts/sam.sh"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "src" / "dispatch_fn" / "certs").mkdir(parents=True)
    return tmp_path


def _bundle(clone: Path, text: str = _PEM) -> None:
    (clone / "src" / "dispatch_fn" / "certs" / "rds-global-bundle.pem").write_text(text)


def _make(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args, "DRY_RUN=1"],
        cwd=clone, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def _sam_commands(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        line.removeprefix("would run: ")
        for line in done.stdout.splitlines()
        if line.startswith("would run: ")
    ]


def test_make_build_refuses_without_the_ca_bundle_and_says_how_to_fetch_it(clone: Path) -> None:
    done = _make(clone, "build")
    assert done.returncode != 0
    assert "src/dispatch_fn/certs/rds-global-bundle.pem" in done.stderr
    assert "./scripts/fetch-rds-ca.sh" in done.stderr
    assert _sam_commands(done) == []


def test_make_build_refuses_a_bundle_that_holds_no_certificate(clone: Path) -> None:
    _bundle(clone, "<html>403 Forbidden</html>\n")  # what a failed download can leave
    done = _make(clone, "build")
    assert done.returncode != 0
    assert "no PEM certificate" in done.stderr
    assert _sam_commands(done) == []


def test_make_deploy_refuses_without_the_ca_bundle_before_reaching_sam(clone: Path) -> None:
    done = _make(clone, "deploy")
    assert done.returncode != 0
    assert "./scripts/fetch-rds-ca.sh" in done.stderr
    assert _sam_commands(done) == []


def test_make_build_runs_the_pinned_sam_build_once_the_bundle_is_there(clone: Path) -> None:
    _bundle(clone)
    done = _make(clone, "build")
    assert done.returncode == 0, done.stderr
    assert _sam_commands(done) == [".tools-sam/bin/sam build --config-env default"]


def test_make_deploy_is_guided_while_samconfig_still_holds_its_placeholders(clone: Path) -> None:
    _bundle(clone)
    assert "REPLACE_ME" in (clone / "samconfig.toml").read_text()
    done = _make(clone, "deploy")
    assert done.returncode == 0, done.stderr
    assert _sam_commands(done) == [
        ".tools-sam/bin/sam build --config-env default",
        ".tools-sam/bin/sam deploy --guided --config-env default",
    ]


def test_make_deploy_deploys_unguided_once_the_environment_is_filled_in(clone: Path) -> None:
    _bundle(clone)
    config = clone / "samconfig.toml"
    config.write_text(config.read_text().replace("REPLACE_ME", "subnet-0123456789abcdef0"))
    done = _make(clone, "deploy", "CONFIG_ENV=prod", "ARGS=--no-confirm-changeset")
    assert done.returncode == 0, done.stderr
    assert _sam_commands(done) == [
        ".tools-sam/bin/sam build --config-env prod",
        ".tools-sam/bin/sam deploy --config-env prod --no-confirm-changeset",
    ]


def test_make_deploy_is_guided_for_an_environment_samconfig_does_not_have(clone: Path) -> None:
    _bundle(clone)
    done = _make(clone, "deploy", "CONFIG_ENV=staging")
    assert done.returncode == 0, done.stderr
    assert _sam_commands(done)[-1] == ".tools-sam/bin/sam deploy --guided --config-env staging"

"""``make build`` and ``make deploy``: the pinned SAM CLI, the right arguments, the CA bundle first.

Each test runs the Makefile's target in a copy of the files it uses, with
``DRY_RUN=1``: the script prints the sam commands it would run, so what reaches
sam is seen without an AWS account. Where the real run matters (the
environment sam runs in), a fake ``sam`` in the copy's ``.tools-sam`` records
what it was given. Standard input is no terminal, as in CI, unless a test gives
it one (a pseudo-terminal).
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The Makefile, the scripts, samconfig.toml and the certs directory, as a clone has them."""
    scripts = ("env.sh", "sam.sh", "fetch-rds-ca.sh", "deploy_plan.py")
    for name in ("Makefile", "samconfig.toml", "requirements/sam.txt",
                 *(f"scripts/{script}" for script in scripts)):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "src" / "dispatch_fn" / "certs").mkdir(parents=True)
    return tmp_path


def _bundle(clone: Path, text: str = _PEM) -> None:
    (clone / "src" / "dispatch_fn" / "certs" / "rds-global-bundle.pem").write_text(text)


def _make(
    clone: Path, *args: str, dry_run: bool = True, terminal: bool = False
) -> subprocess.CompletedProcess[str]:
    command = ["make", "--no-print-directory", *args, *(["DRY_RUN=1"] if dry_run else [])]
    if not terminal:
        return subprocess.run(
            command, cwd=clone, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            check=False, timeout=120,
        )  # fmt: skip
    controller, follower = pty.openpty()
    try:
        return subprocess.run(
            command, cwd=clone, stdin=follower, capture_output=True, text=True, check=False,
            timeout=120,
        )  # fmt: skip
    finally:
        os.close(follower)
        os.close(controller)


def _fake_sam(clone: Path) -> Path:
    """A ``sam`` in the clone's .tools-sam that records its arguments and telemetry setting."""
    tools = clone / ".tools-sam"
    (tools / "bin").mkdir(parents=True)
    log = clone / "sam-calls.txt"
    sam = tools / "bin" / "sam"
    sam.write_text(
        f'#!/usr/bin/env bash\necho "telemetry=${{SAM_CLI_TELEMETRY:-unset}} $*" >> {log}\n'
    )
    sam.chmod(0o755)
    # The stamp env.sh compares, so that the fake is taken as the installed SAM CLI.
    pins = (clone / "requirements" / "sam.txt").read_bytes()
    (tools / ".stamp").write_text(hashlib.sha256(pins).hexdigest()[:16] + "\n")
    return log


def _fill_in(clone: Path) -> None:
    """samconfig.toml as an operator leaves it: every placeholder filled in."""
    config = clone / "samconfig.toml"
    text = config.read_text().replace(
        "AlarmTopicArn=REPLACE_ME", "AlarmTopicArn=arn:aws:sns:us-east-1:123456789012:pager"
    )
    config.write_text(text.replace("REPLACE_ME", "subnet-0123456789abcdef0"))


def _sam_commands(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        line.removeprefix("would run: ")
        for line in done.stdout.splitlines()
        if line.startswith("would run: ")
    ]


def test_make_build_refuses_without_the_ca_bundle_and_says_how_to_fetch_it(clone: Path) -> None:
    calls = _fake_sam(clone)
    done = _make(clone, "build", dry_run=False)
    assert done.returncode != 0
    assert "src/dispatch_fn/certs/rds-global-bundle.pem" in done.stderr
    assert "./scripts/fetch-rds-ca.sh" in done.stderr
    assert not calls.exists()


def test_make_build_refuses_a_bundle_that_holds_no_certificate(clone: Path) -> None:
    calls = _fake_sam(clone)
    _bundle(clone, "<html>403 Forbidden</html>\n")  # what a failed download can leave
    done = _make(clone, "build", dry_run=False)
    assert done.returncode != 0
    assert "no PEM certificate" in done.stderr
    assert not calls.exists()


def test_make_deploy_refuses_without_the_ca_bundle_before_reaching_sam(clone: Path) -> None:
    calls = _fake_sam(clone)
    _fill_in(clone)
    done = _make(clone, "deploy", dry_run=False)
    assert done.returncode != 0
    assert "./scripts/fetch-rds-ca.sh" in done.stderr
    assert not calls.exists()


def test_a_dry_run_without_the_ca_bundle_prints_what_it_would_do_and_names_the_bundle(
    clone: Path,
) -> None:
    _fill_in(clone)
    done = _make(clone, "deploy", "CONFIG_ENV=prod", "ARGS=--no-confirm-changeset")
    assert done.returncode == 0, done.stderr
    build, deploy = _sam_commands(done)
    assert build == ".tools-sam/bin/sam build --config-env prod"
    # The file's settings, passed with the digest of this deploy's configuration.
    assert deploy.startswith(".tools-sam/bin/sam deploy --config-env prod --parameter-overrides ")
    assert deploy.endswith(" --no-confirm-changeset")
    assert "DatabaseAuth=iam" in shlex.split(deploy)
    assert len(_digest(done)) == 16
    assert "src/dispatch_fn/certs/rds-global-bundle.pem" in done.stderr
    assert "./scripts/fetch-rds-ca.sh" in done.stderr


def test_make_build_runs_the_pinned_sam_build_once_the_bundle_is_there(clone: Path) -> None:
    _bundle(clone)
    done = _make(clone, "build")
    assert done.returncode == 0, done.stderr
    assert _sam_commands(done) == [".tools-sam/bin/sam build --config-env default"]


def test_make_deploy_is_guided_while_samconfig_still_holds_its_placeholders(clone: Path) -> None:
    _bundle(clone)
    assert "REPLACE_ME" in (clone / "samconfig.toml").read_text()
    done = _make(clone, "deploy", terminal=True)
    assert done.returncode == 0, done.stderr
    assert _sam_commands(done) == [
        ".tools-sam/bin/sam build --config-env default",
        ".tools-sam/bin/sam deploy --guided --config-env default",
    ]


def test_make_deploy_deploys_unguided_once_the_environment_is_filled_in(clone: Path) -> None:
    _bundle(clone)
    _fill_in(clone)
    done = _make(clone, "deploy", "CONFIG_ENV=prod", "ARGS=--no-confirm-changeset")
    assert done.returncode == 0, done.stderr
    build, deploy = _sam_commands(done)
    assert build == ".tools-sam/bin/sam build --config-env prod"
    # The file's settings, passed with the digest of this deploy's configuration.
    assert deploy.startswith(".tools-sam/bin/sam deploy --config-env prod --parameter-overrides ")
    assert deploy.endswith(" --no-confirm-changeset")
    assert "DatabaseAuth=iam" in shlex.split(deploy)
    assert len(_digest(done)) == 16


@pytest.mark.parametrize("target", ["deploy", "build", "local-invoke"])
def test_an_environment_samconfig_does_not_have_is_refused_naming_those_it_has(
    clone: Path, target: str
) -> None:
    _bundle(clone)
    done = _make(clone, target, "CONFIG_ENV=staging", terminal=True)
    assert done.returncode != 0
    assert "[staging]" in done.stderr
    assert "default, prod" in done.stderr
    assert _sam_commands(done) == []


# --- a deploy that CI can run -----------------------------------------------------

_CI_OVERRIDES = (
    "DatabaseOwnerSecretArn=arn:aws:secretsmanager:us-east-1:123456789012:secret:owner-AbCdEf "
    "SubnetIds=subnet-aaa,subnet-bbb SecurityGroupIds=sg-ccc "
    "DatabaseClusterResourceId=cluster-ABCDEFGHIJKL0123 "
    "AlarmTopicArn=arn:aws:sns:us-east-1:123456789012:pager"
)


def test_ci_deploys_without_a_terminal_with_the_placeholders_given_in_args(clone: Path) -> None:
    _bundle(clone)
    assert "REPLACE_ME" in (clone / "samconfig.toml").read_text()
    done = _make(
        clone, "deploy", "CONFIG_ENV=prod",
        f"ARGS=--parameter-overrides {_CI_OVERRIDES} --no-confirm-changeset",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    build, deploy = _sam_commands(done)
    assert build == ".tools-sam/bin/sam build --config-env prod"
    assert "--guided" not in deploy
    assert deploy.startswith(".tools-sam/bin/sam deploy --config-env prod --parameter-overrides ")
    assert deploy.endswith(" --no-confirm-changeset")
    words = shlex.split(deploy)
    # The file's settings stay; ARGS supplies (and wins for) the account's own values.
    for kept in ("DatabaseAuth=iam", "DatabaseSslMode=verify-full", "DatabaseUsesRdsProxy=false"):
        assert kept in words
    for given in _CI_OVERRIDES.split():
        assert given in words
    assert "REPLACE_ME" not in deploy


def test_without_a_terminal_placeholders_left_are_refused_by_name_not_sent_to_guided(
    clone: Path,
) -> None:
    _bundle(clone)
    done = _make(clone, "deploy", "ARGS=--parameter-overrides SubnetIds=subnet-aaa")
    assert done.returncode != 0
    assert "DatabaseOwnerSecretArn" in done.stderr
    assert "DatabaseSecretArn" in done.stderr
    assert "SubnetIds" not in done.stderr.split("REPLACE_ME")[1].split("\n")[0]
    assert "no terminal" in done.stderr
    assert "--parameter-overrides" in done.stderr
    assert _sam_commands(done) == []


def test_without_a_terminal_a_change_set_to_confirm_is_refused_with_the_flag_to_pass(
    clone: Path,
) -> None:
    _bundle(clone)
    _fill_in(clone)
    done = _make(clone, "deploy", "CONFIG_ENV=prod")
    assert done.returncode != 0
    assert "confirm_changeset" in done.stderr
    assert "--no-confirm-changeset" in done.stderr
    assert _sam_commands(done) == []
    on_a_terminal = _make(clone, "deploy", "CONFIG_ENV=prod", terminal=True)
    assert on_a_terminal.returncode == 0, on_a_terminal.stderr


def test_prod_ships_its_alarm_topic_as_a_placeholder_not_as_empty() -> None:
    text = (ROOT / "samconfig.toml").read_text()
    prod = text.split("[prod.deploy.parameters]")[1]
    assert "AlarmTopicArn=REPLACE_ME" in prod
    assert 'AlarmTopicArn=""' not in text


@pytest.mark.parametrize("topic", ['AlarmTopicArn=""', "AlarmTopicArn="])
def test_prod_without_an_alarm_topic_is_refused(clone: Path, topic: str) -> None:
    _bundle(clone)
    overrides = _CI_OVERRIDES.replace("AlarmTopicArn=arn:aws:sns:us-east-1:123456789012:pager", "")
    done = _make(
        clone, "deploy", "CONFIG_ENV=prod",
        f"ARGS=--parameter-overrides {overrides} {topic} --no-confirm-changeset",
    )  # fmt: skip
    assert done.returncode != 0
    assert "AlarmTopicArn" in done.stderr
    assert "notify no one" in done.stderr
    assert _sam_commands(done) == []
    allowed = _make(
        clone, "deploy", "CONFIG_ENV=prod", "ALLOW_NO_ALARM_TOPIC=1",
        f"ARGS=--parameter-overrides {overrides} {topic} --no-confirm-changeset",
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert "WARNING" in allowed.stderr


def test_another_environment_without_an_alarm_topic_deploys_with_a_loud_warning(
    clone: Path,
) -> None:
    _bundle(clone)
    _fill_in(clone)
    done = _make(clone, "deploy")
    assert done.returncode == 0, done.stderr
    assert "WARNING" in done.stderr
    assert "AlarmTopicArn" in done.stderr


def test_sam_runs_with_its_telemetry_off(clone: Path) -> None:
    calls = _fake_sam(clone)
    _bundle(clone)
    _fill_in(clone)
    done = _make(clone, "deploy", "ARGS=--no-confirm-changeset", dry_run=False)
    assert done.returncode == 0, done.stderr
    recorded = calls.read_text().splitlines()
    assert [line.split()[1] for line in recorded] == ["build", "deploy"]
    assert all(line.startswith("telemetry=0 ") for line in recorded)


def test_make_local_invoke_builds_and_runs_sam_local_invoke_with_the_env_file(
    clone: Path,
) -> None:
    done = _make(clone, "local-invoke", "EVENT=events/scheduler.json")
    assert done.returncode == 0, done.stderr
    assert _sam_commands(done) == [
        ".tools-sam/bin/sam build --config-env default",
        ".tools-sam/bin/sam local invoke DispatchFunction --event events/scheduler.json "
        "--env-vars events/env/local-postgres.json --add-host host.docker.internal:host-gateway",
    ]


def test_fetching_the_ca_bundle_without_a_network_says_what_to_do(clone: Path) -> None:
    done = subprocess.run(
        ["./scripts/fetch-rds-ca.sh"],
        cwd=clone, capture_output=True, text=True, check=False, timeout=120,
        env={**os.environ, "RDS_CA_URL": "https://truststore.duly.invalid/global-bundle.pem"},
    )  # fmt: skip
    assert done.returncode != 0
    assert "truststore.duly.invalid" in done.stderr
    assert "HTTPS_PROXY" in done.stderr
    assert "CA_BUNDLE" in done.stderr
    assert "src/dispatch_fn/certs/rds-global-bundle.pem" in done.stderr
    assert not list((clone / "src" / "dispatch_fn" / "certs").iterdir())


_SAM_PARSES = """
import json, sys
from samcli.cli.types import CfnParameterOverridesType
print(json.dumps(CfnParameterOverridesType().convert(tuple(sys.argv[1:]), None, None)))
"""


def test_sam_reads_the_merged_overrides_as_the_file_and_args_meant_them(clone: Path) -> None:
    sam_python = ROOT / ".tools-sam" / "bin" / "python"
    if not sam_python.is_file():
        subprocess.run([str(ROOT / "scripts" / "template_gates.sh")], check=True, cwd=ROOT)
    _bundle(clone)
    done = _make(
        clone, "deploy", "CONFIG_ENV=prod",
        f"ARGS=--parameter-overrides {_CI_OVERRIDES} --no-confirm-changeset",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    words = shlex.split(_sam_commands(done)[-1])
    overrides = words[
        words.index("--parameter-overrides") + 1 : words.index("--no-confirm-changeset")
    ]
    parsed = subprocess.run(
        [str(sam_python), "-c", _SAM_PARSES, *overrides],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    owner = "arn:aws:secretsmanager:us-east-1:123456789012:secret:owner-AbCdEf"
    read = json.loads(parsed.stdout)
    assert len(read.pop("ConfigurationDigest")) == 16
    assert read == {
        "DatabaseOwnerSecretArn": owner,
        "DatabaseAuth": "iam",
        "DatabaseSecretArn": "",
        "DatabaseClusterResourceId": "cluster-ABCDEFGHIJKL0123",
        "DatabaseSecretKmsKeyArn": "",
        "SubnetIds": "subnet-aaa,subnet-bbb",
        "SecurityGroupIds": "sg-ccc",
        "DatabaseSslMode": "verify-full",
        "DatabaseUsesRdsProxy": "false",
        "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:pager",
    }


def _digest(done: subprocess.CompletedProcess[str]) -> str:
    words = shlex.split(_sam_commands(done)[-1])
    (digest,) = (word for word in words if word.startswith("ConfigurationDigest="))
    return digest.removeprefix("ConfigurationDigest=")


def test_each_deploy_names_its_configuration_so_a_change_publishes_a_new_version(
    clone: Path,
) -> None:
    _bundle(clone)
    (clone / "template.yaml").write_text("Parameters: {}\n")

    def deploy(*overrides: str) -> str:
        done = _make(
            clone, "deploy", "CONFIG_ENV=prod",
            f"ARGS=--parameter-overrides {_CI_OVERRIDES} {' '.join(overrides)} "
            "--no-confirm-changeset",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return _digest(done)

    first = deploy()
    assert len(first) == 16
    assert int(first, 16) >= 0
    assert deploy() == first
    assert deploy("DispatchWorkers=4") != first
    (clone / "template.yaml").write_text("Parameters: {Changed: {Type: String}}\n")
    assert deploy() != first


def test_a_refused_deploy_installs_and_builds_nothing(clone: Path) -> None:
    _bundle(clone)
    for refused in (["CONFIG_ENV=staging"], ["ARGS=--no-confirm-changeset"]):
        done = _make(clone, "deploy", *refused, dry_run=False)
        assert done.returncode != 0
        assert "error: samconfig.toml" in done.stderr
        assert not (clone / ".tools-sam").exists()
        assert not (clone / ".aws-sam").exists()

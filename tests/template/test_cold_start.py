"""What a cold start loads: the artifact carries no tracing SDK and no AWS SDK (ADR 0006)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BUILT = ROOT / ".aws-sam" / "build" / "DispatchFunction"
# Measured 23.5 MB after ADR 0006 (48.5 MB before); the bar leaves room for upgrades.
_MAX_UNZIPPED_MB = 30

_PROBE = """
import json, sys
sys.path.insert(0, ".")
import dispatch_fn.app
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


@pytest.fixture(scope="module")
def built() -> Path:
    """The sam build output; scripts/test.sh builds it before pytest, or we build it here."""
    if not (BUILT / "dispatch_fn" / "app.py").is_file():
        subprocess.run([str(ROOT / "scripts" / "template_gates.sh")], check=True, cwd=ROOT)
    return BUILT


def test_the_artifact_bundles_neither_the_xray_sdk_nor_boto3(built: Path) -> None:
    for package in ("aws_xray_sdk", "wrapt", "boto3", "botocore", "s3transfer"):
        assert not (built / package).exists(), package
    size = sum(
        path.stat().st_size
        for path in built.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    assert size < _MAX_UNZIPPED_MB * 1e6, f"{size / 1e6:.1f} MB"


def test_importing_the_handler_loads_no_aws_sdk(built: Path) -> None:
    # As Lambda's init phase does, with the task root set so Powertools knows it is in Lambda.
    env = {"PATH": os.environ["PATH"], "LAMBDA_TASK_ROOT": str(built)}
    completed = subprocess.run(
        [str(getattr(sys, "_base_executable", sys.executable)), "-I", "-S", "-c", _PROBE],
        cwd=built,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    loaded = set(json.loads(completed.stdout))
    assert {"dispatch_fn", "psycopg", "aws_lambda_powertools"} <= loaded
    assert not loaded & {"aws_xray_sdk", "boto3", "botocore"}

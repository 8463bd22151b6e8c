"""What a cold start unpacks and loads: a small function, one shared layer, no AWS SDK."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BUILT = ROOT / ".aws-sam" / "build" / "DispatchFunction"
LAYER = ROOT / ".aws-sam" / "build" / "DependenciesLayer"
# Measured after ADR 0006's layer: 0.7 MB of function and 36.9 MB of layer, bytecode
# included (48 MB per function before, twice). The bars leave room for upgrades.
_MAX_FUNCTION_MB = 3
_MAX_LAYER_MB = 45

_PROBE = """
import json, sys
sys.path[:0] = [".", sys.argv[1]]
import dispatch_fn.aws.app
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


@pytest.fixture(scope="module")
def built() -> Path:
    """The sam build output; scripts/test.sh builds it before pytest, or we build it here."""
    if not (BUILT / "dispatch_fn" / "aws" / "app.py").is_file() or not LAYER.is_dir():
        subprocess.run([str(ROOT / "scripts" / "template_gates.sh")], check=True, cwd=ROOT)
    return BUILT


def _megabytes(directory: Path) -> float:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file()) / 1e6


def test_the_layer_bundles_neither_the_xray_sdk_nor_boto3(built: Path) -> None:
    for package in ("aws_xray_sdk", "wrapt", "boto3", "botocore", "s3transfer"):
        assert not (LAYER / "python" / package).exists(), package
    assert _megabytes(LAYER) < _MAX_LAYER_MB
    for function in (built, built.parent / "MigrationFunction"):
        assert _megabytes(function) < _MAX_FUNCTION_MB, function


def test_importing_the_handler_with_its_layer_loads_no_aws_sdk(built: Path) -> None:
    # As Lambda's init phase does, with the task root set so Powertools knows it is in Lambda.
    env = {"PATH": os.environ["PATH"], "LAMBDA_TASK_ROOT": str(built)}
    completed = subprocess.run(
        [str(getattr(sys, "_base_executable", sys.executable)), "-I", "-S", "-B", "-c", _PROBE,
         str(LAYER / "python")],
        cwd=built, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    loaded = set(json.loads(completed.stdout))
    assert {"dispatch_fn", "psycopg", "aws_lambda_powertools"} <= loaded
    assert not loaded & {"aws_xray_sdk", "boto3", "botocore"}


def test_the_benchmark_measures_the_function_and_its_layer_together(built: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cold_start.py"), "--runs", "1"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    sizes = dict(re.findall(r"(function|layer|total) ([\d.]+) MB", completed.stdout))
    assert set(sizes) == {"function", "layer", "total"}, completed.stdout
    assert float(sizes["total"]) == pytest.approx(
        float(sizes["function"]) + float(sizes["layer"]), abs=0.11
    )
    assert "botocore loaded: False" in completed.stdout

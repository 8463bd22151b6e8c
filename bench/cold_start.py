"""What a cold start costs: the built artifact's size and the handler's import time.

Imports ``app`` from ``.aws-sam/build/DispatchFunction`` in a fresh, isolated
interpreter (the directory on ``sys.path``, nothing else), the way Lambda's
init phase does, several times, and prints the figures ADR 0006 records.

    .venv/bin/python bench/cold_start.py [--runs 7] [--env NAME=VALUE ...]

``--env`` sets the function's environment for the import (for instance
``DISPATCH_TRACING=Active`` to measure with the X-Ray SDK loaded).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / ".aws-sam" / "build" / "DispatchFunction"

_PROBE = """
import json, sys, time
sys.path.insert(0, ".")
started, cpu = time.perf_counter(), time.process_time()
import dispatch_fn.app
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"import_s": elapsed, "cpu_s": cpu, "xray": "aws_xray_sdk.core" in sys.modules,
                  "botocore": "botocore" in sys.modules, "modules": len(sys.modules)}))
"""


def _size(directory: Path) -> tuple[int, int]:
    """Bytes unzipped, and bytes as the deployment zip."""
    # Bytecode left by --warm-bytecode runs is not part of what sam build produced.
    files = [
        path for path in directory.rglob("*") if path.is_file() and "__pycache__" not in path.parts
    ]
    unzipped = sum(path.stat().st_size for path in files)
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(directory))
    return unzipped, len(buffer.getvalue())


def main() -> int:
    """Measure and print; exit 1 when there is no build to measure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--build", type=Path, default=BUILT, help="an unpacked artifact")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--warm-bytecode", action="store_true", help="reuse compiled bytecode")
    args = parser.parse_args()
    built: Path = args.build
    if not (built / "dispatch_fn" / "app.py").is_file():
        print(f"no build in {built}; run `sam build` (or make test) first", file=sys.stderr)
        return 1
    # What Lambda sets: the task root makes Powertools believe it runs in Lambda.
    env = {"PATH": os.environ["PATH"], "LAMBDA_TASK_ROOT": str(built),
           "AWS_LAMBDA_FUNCTION_NAME": "duly-dispatcher", "AWS_REGION": "eu-west-1"}  # fmt: skip
    env.update(item.split("=", 1) for item in args.env)
    python = str(getattr(sys, "_base_executable", sys.executable))
    samples = []
    for _ in range(args.runs):
        # Lambda's /var/task is read-only and the zip holds no bytecode, so every
        # cold start compiles each module it imports: a fresh, empty bytecode
        # cache per run measures that (--warm-bytecode measures without it).
        cache = ["-X", f"pycache_prefix={tempfile.mkdtemp(prefix='duly-pyc-')}"]
        completed = subprocess.run(
            [python, "-I", "-S", *([] if args.warm_bytecode else cache), "-c", _PROBE],
            cwd=built,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        samples.append(json.loads(completed.stdout.strip().splitlines()[-1]))
    unzipped, zipped = _size(built)
    times = sorted(sample["import_s"] for sample in samples)
    # CPU time is what the import costs; wall time adds whatever else the machine runs.
    cpu = sorted(sample["cpu_s"] for sample in samples)
    print(
        f"artifact {unzipped / 1e6:.1f} MB unzipped, {zipped / 1e6:.1f} MB zipped; "
        f"import dispatch_fn.app over {args.runs} runs: median {statistics.median(times):.3f} s, "
        f"range {times[0]:.3f}-{times[-1]:.3f} s; CPU median {statistics.median(cpu):.3f} s, "
        f"range {cpu[0]:.3f}-{cpu[-1]:.3f} s; X-Ray SDK loaded: {samples[0]['xray']}, "
        f"botocore loaded: {samples[0]['botocore']}, modules: {samples[0]['modules']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

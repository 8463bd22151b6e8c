"""What a cold start costs: the deployed code's size and the handler's import time.

Zips the built function (``.aws-sam/build/DispatchFunction``) and its layer
(``.aws-sam/build/DependenciesLayer``, when the build has one) as ``sam deploy``
uploads them, unpacks each the way Lambda does (``/var/task`` and ``/opt``, the
zip's timestamps kept), and imports ``app`` there in a fresh, isolated
interpreter several times: the function's directory, then the layer's
``python/``, on ``sys.path`` and nothing else, and no bytecode written, since
Lambda's file system is read-only. It prints the figures ADR 0006 records.

    .venv/bin/python bench/cold_start.py [--runs 7] [--ignore-bytecode] [--env NAME=VALUE ...]

``--build`` and ``--layer`` measure another build (``--layer ''`` for none).
``--ignore-bytecode`` ignores whatever bytecode the zip carries, as an artifact
without any pays: every module is compiled at every cold start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / ".aws-sam" / "build" / "DispatchFunction"
LAYER = ROOT / ".aws-sam" / "build" / "DependenciesLayer"

_PROBE = """
import json, sys, time
sys.path[:0] = sys.argv[1:]
started, cpu = time.perf_counter(), time.process_time()
import dispatch_fn.aws.app
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"import_s": elapsed, "cpu_s": cpu, "modules": len(sys.modules),
                  "botocore": "botocore" in sys.modules}))
"""


@dataclass(frozen=True)
class Part:
    """One uploaded zip: the function's code or its layer."""

    name: str
    unzipped: int
    zipped: int


def _pack(name: str, directory: Path, archive: Path) -> Part:
    """Zip ``directory`` whole, as ``sam deploy`` does, and say how big each side is."""
    files = sorted(path for path in directory.rglob("*") if path.is_file())
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as packed:
        for path in files:
            packed.write(path, path.relative_to(directory))
    return Part(name, sum(path.stat().st_size for path in files), archive.stat().st_size)


def _unpack(archive: Path, target: Path) -> None:
    """Unzip with each entry's timestamp (two-second resolution), as ``unzip`` does."""
    with zipfile.ZipFile(archive) as packed:
        packed.extractall(target)
        for entry in packed.infolist():
            stamp = time.mktime((*entry.date_time, 0, 0, -1))
            os.utime(target / entry.filename, (stamp, stamp))


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def main() -> int:
    """Measure and print; exit 1 when there is no build to measure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--build", type=Path, default=BUILT, help="the built function")
    parser.add_argument("--layer", default=str(LAYER), help="the built layer ('' for none)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--ignore-bytecode", action="store_true", help="compile every module")
    args = parser.parse_args()
    built: Path = args.build
    layer = Path(args.layer) if args.layer and Path(args.layer).is_dir() else None
    if not (built / "dispatch_fn" / "aws" / "app.py").is_file():
        print(f"no build in {built}; run `make build` (or make test) first", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="duly-cold-") as scratch:
        task, opt = Path(scratch, "task"), Path(scratch, "opt")
        parts = [_pack("function", built, Path(scratch, "function.zip"))]
        _unpack(Path(scratch, "function.zip"), task)
        path = [str(task)]
        if layer is not None:
            parts.append(_pack("layer", layer, Path(scratch, "layer.zip")))
            _unpack(Path(scratch, "layer.zip"), opt)
            path.append(str(opt / "python"))
        # What Lambda sets: the task root makes Powertools believe it runs in Lambda.
        env = {
            "PATH": os.environ["PATH"],
            "LAMBDA_TASK_ROOT": str(task),
            "AWS_LAMBDA_FUNCTION_NAME": "duly-dispatcher",
            "AWS_REGION": "eu-west-1",
        }
        env.update(item.split("=", 1) for item in args.env)
        python = str(getattr(sys, "_base_executable", sys.executable))
        samples = []
        for _ in range(args.runs):
            # -B: nothing is written, as on Lambda's read-only file system; an
            # empty bytecode cache elsewhere hides the zip's own bytecode.
            ignore = ["-X", f"pycache_prefix={tempfile.mkdtemp(dir=scratch)}"]
            completed = subprocess.run(
                [python, "-I", "-S", "-B", *(ignore if args.ignore_bytecode else []),
                 "-c", _PROBE, *path],
                cwd=task, env=env, capture_output=True, text=True, check=True, timeout=120,
            )  # fmt: skip
            samples.append(json.loads(completed.stdout.strip().splitlines()[-1]))
    sizes = "; ".join(f"{p.name} {_mb(p.unzipped)} unzipped, {_mb(p.zipped)} zipped" for p in parts)
    total = f"total {_mb(sum(p.unzipped for p in parts))}, {_mb(sum(p.zipped for p in parts))}"
    times = sorted(sample["import_s"] for sample in samples)
    # CPU time is what the import costs; wall time adds whatever else the machine runs.
    cpu = sorted(sample["cpu_s"] for sample in samples)
    bytecode = "ignored" if args.ignore_bytecode else "as shipped"
    print(
        f"{sizes}; {total}\n"
        f"import dispatch_fn.aws.app, bytecode {bytecode}, over {args.runs} runs: "
        f"CPU median {statistics.median(cpu):.3f} s, range {cpu[0]:.3f}-{cpu[-1]:.3f} s; "
        f"wall median {statistics.median(times):.3f} s, range {times[0]:.3f}-{times[-1]:.3f} s; "
        f"modules: {samples[0]['modules']}, botocore loaded: {samples[0]['botocore']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``sam local invoke DispatchFunction -e events/... --env-vars events/env/local-postgres.json``.

Two halves of that command, as close as a machine without Docker comes:

- SAM CLI's own ``local invoke`` command, from its command line to the point
  where it would start a container, resolves the function from the built
  template and the environment from the template and the env file; only its
  two Docker-bound steps are replaced, and ``LocalLambdaRunner.invoke`` reports
  what it would run instead of running it.
- That function, as ``sam build`` left it (the package, then the layer, with no
  ``src/`` on the path), is loaded by ``awslambdaric``, the runtime interface
  client Lambda's python3.12 runtime uses, in a fresh interpreter with exactly
  the environment SAM resolved, and answers every event in ``events/`` through
  a Runtime API served here, against the test database.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dispatch_fn.cli.demo import seed
from dispatch_fn.settings import Settings
from support import EVENTS_DIR, task_count

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / ".aws-sam" / "build"
ENV_FILE = EVENTS_DIR / "env" / "local-postgres.json"
SAM_PYTHON = ROOT / ".tools-sam" / "bin" / "python"

# Runs `sam local invoke` in the SAM CLI's own interpreter. The container manager
# and the runtime it drives are what need Docker; the invoke reports the function's
# configuration as SAM built it (code, handler, layers, environment) and the event.
_SAM_PROBE = """
import json, sys
from samcli.cli.main import cli
from samcli.commands.local.cli_common.invoke_context import InvokeContext
from samcli.commands.local.lib.local_lambda import LocalLambdaRunner

InvokeContext._get_container_manager = staticmethod(lambda *args: None)
InvokeContext.lambda_runtime = property(lambda self: None)
seen = {}

def report(self, function_identifier, event, **kwargs):
    config = self.get_invoke_config(self.provider.get(function_identifier))
    seen.update(
        code=config.code_abs_path, handler=config.handler, runtime=config.runtime,
        layers=[layer.codeuri for layer in config.layers],
        environment=config.env_vars.resolve(), event=json.loads(event),
    )

LocalLambdaRunner.invoke = report
cli.main(args=sys.argv[1:], prog_name="sam", standalone_mode=False)
print(json.dumps(seen))
"""

# Lambda's python3.12 runtime: the function's directory, then the layer's python/,
# then the runtime's own directory (here: awslambdaric alone), and the runtime
# interface client's main with the template's handler string.
_RUNTIME = """
import sys
sys.path[:0] = sys.argv[2:]
from awslambdaric.__main__ import main
main(["awslambdaric", sys.argv[1]])
"""


def _sam_environment() -> dict[str, str]:
    # No credentials, no profile, no telemetry, no shell variable that SAM would let
    # stand in for a declared one: what the env file and the template say, only.
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAM_CLI_TELEMETRY": "0",
    }


@pytest.fixture(scope="module")
def built() -> Path:
    """The sam build output; scripts/test.sh builds it before pytest, or we build it here."""
    if not (BUILT / "template.yaml").is_file() or not SAM_PYTHON.is_file():
        subprocess.run([str(ROOT / "scripts" / "template_gates.sh")], check=True, cwd=ROOT)
    return BUILT


def _sam_local_invoke(event: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(SAM_PYTHON), "-c", _SAM_PROBE, "local", "invoke", "DispatchFunction",
         "-e", str(event.relative_to(ROOT)), "--env-vars", str(ENV_FILE.relative_to(ROOT))],
        cwd=ROOT, env=_sam_environment(), capture_output=True, text=True, check=False,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    resolved: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return resolved


@pytest.fixture(scope="module")
def resolved(built: Path) -> dict[str, Any]:
    """What `sam local invoke` would start, for the README's backfill."""
    return _sam_local_invoke(EVENTS_DIR / "backfill-13-months.json")


def test_sam_local_invoke_runs_the_built_function_with_the_layer_and_the_templates_handler(
    built: Path, resolved: dict[str, Any]
) -> None:
    assert Path(resolved["code"]) == built / "DispatchFunction"
    assert resolved["handler"] == "dispatch_fn.aws.app.lambda_handler"
    assert resolved["runtime"] == "python3.12"
    assert [Path(layer) for layer in resolved["layers"]] == [built / "DependenciesLayer"]
    assert resolved["event"] == json.loads((EVENTS_DIR / "backfill-13-months.json").read_text())


def test_the_env_file_sets_the_database_url_and_sams_resolution_is_a_working_configuration(
    resolved: dict[str, Any],
) -> None:
    environment = resolved["environment"]
    from_file = json.loads(ENV_FILE.read_text())["DispatchFunction"]
    # SAM sets only the variables the template declares: each the file names is one.
    assert {name: environment.get(name) for name in from_file} == from_file
    # The endpoint the migration step reports is not known locally: SAM leaves it
    # empty, and the URL is where the function connects.
    assert environment["DB_HOST"] == ""
    settings = Settings.from_environ(environment)
    assert settings.database_url == from_file["DATABASE_URL"]
    assert (settings.auth, settings.sslmode, settings.sslrootcert) == ("password", "disable", None)
    assert settings.chunk_size == 10_000  # the template's defaults, resolved by SAM


def _runtime_path() -> Path:
    """The directory holding awslambdaric and what it imports, and nothing else."""
    spec = importlib.util.find_spec("awslambdaric")
    assert spec is not None
    assert spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))).parent


@pytest.fixture(scope="module")
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = _runtime_path()
    target = tmp_path_factory.mktemp("var-runtime")
    for pattern in ("awslambdaric", "runtime_client*.so", "simplejson", "snapshot_restore_py*"):
        for found in site.glob(pattern):
            if not found.name.endswith(".dist-info"):
                (target / found.name).symlink_to(found)
    assert (target / "awslambdaric").exists()
    return target


class RuntimeApi:
    """Lambda's Runtime API, as the runtime interface client speaks it: one event at a time."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.pending = list(enumerate(events))
        self.answers: dict[int, tuple[str, Any]] = {}
        self.init_error: Any = None
        self.all_answered = threading.Event()
        self.stopping = threading.Event()
        self.total = len(events)

    def next_event(self) -> tuple[int, dict[str, Any]] | None:
        return self.pending.pop(0) if self.pending else None

    def answer(self, index: int, kind: str, body: Any) -> None:
        self.answers[index] = (kind, body)
        if len(self.answers) == self.total:
            self.all_answered.set()


def _handler_class(api: RuntimeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else None

        def _reply(
            self, status: int, body: bytes = b"", headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if not self.path.endswith("/runtime/invocation/next"):
                self._reply(404)
                return
            pending = api.next_event()
            if pending is None:
                # The client waits for the next event until the test ends the process.
                api.stopping.wait(120)
                self._reply(410)
                return
            index, event = pending
            deadline_ms = int(time.time() * 1000) + 900_000
            self._reply(
                200,
                json.dumps(event).encode(),
                {
                    "Content-Type": "application/json",
                    "Lambda-Runtime-Aws-Request-Id": f"request-{index}",
                    "Lambda-Runtime-Deadline-Ms": str(deadline_ms),
                    "Lambda-Runtime-Invoked-Function-Arn": (
                        "arn:aws:lambda:us-east-1:123456789012:function:DispatchFunction"
                    ),
                },
            )

        def do_POST(self) -> None:
            parts = self.path.strip("/").split("/")
            body = self._body()
            if parts[-2:] == ["init", "error"]:
                api.init_error = body
                api.all_answered.set()
            elif parts[-3] == "invocation" and parts[-1] in ("response", "error"):
                api.answer(int(parts[-2].removeprefix("request-")), parts[-1], body)
            self._reply(202)

    return Handler


@pytest.fixture
def runtime_api(request: pytest.FixtureRequest) -> Iterator[tuple[RuntimeApi, str]]:
    api = RuntimeApi(request.param)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(api))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield api, f"127.0.0.1:{server.server_address[1]}"
    api.stopping.set()
    server.shutdown()
    server.server_close()


def _base_python() -> str:
    # The interpreter the venv was made from: it has none of the venv's packages.
    return str(getattr(sys, "_base_executable", sys.executable))


_EVENT_FILES = sorted(EVENTS_DIR.glob("*.json"))


@pytest.mark.parametrize(
    "runtime_api",
    [[json.loads(path.read_text()) for path in _EVENT_FILES]],
    indirect=True,
    ids=["every-event"],
)
def test_the_built_artifact_loaded_by_lambdas_runtime_client_answers_every_event(
    resolved: dict[str, Any],
    runtime_dir: Path,
    runtime_api: tuple[RuntimeApi, str],
    conn: psycopg.Connection[Any],
    db_url: str,
) -> None:
    seed(conn)
    api, address = runtime_api
    # SAM's environment, with the env file's database where Docker would map it
    # (host.docker.internal is the machine running the test database); SAM passes
    # only declared variables, so the URL is there only if the template declares it.
    assert resolved["environment"]["DATABASE_URL"].startswith("postgresql://")
    environment = {
        **resolved["environment"],
        "DATABASE_URL": db_url,
        "AWS_LAMBDA_RUNTIME_API": address,
        "PATH": os.environ["PATH"],
    }
    layer_python = Path(resolved["layers"][0]) / "python"
    process = subprocess.Popen(
        [_base_python(), "-I", "-S", "-c", _RUNTIME, resolved["handler"],
         resolved["code"], str(layer_python), str(runtime_dir)],
        cwd=resolved["code"], env=environment,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        answered = api.all_answered.wait(300)
    finally:
        process.kill()
        output, _ = process.communicate(timeout=30)
    assert api.init_error is None, (api.init_error, output[-3000:])
    assert answered, output[-3000:]
    names = [path.name for path in _EVENT_FILES]
    answers = {names[index]: answer for index, answer in api.answers.items()}
    failed = {name: body for name, (kind, body) in answers.items() if kind != "response"}
    assert failed == {}, output[-3000:]
    reports = {name: body for name, (_, body) in answers.items()}
    for name, report in reports.items():
        assert isinstance(report, dict), name
        assert report, name
        assert "errorType" not in report, (name, report)
    assert reports["backfill-13-months.json"]["tasks_created"] > 0
    assert reports["backfill-dry-run.json"]["dry_run"] is True
    assert reports["query-explain.json"]["explain"]["found"] is True
    assert task_count(conn) > 0
    # The handler and the package came from the artifact, psycopg from the layer.
    assert "Unable to import module" not in output

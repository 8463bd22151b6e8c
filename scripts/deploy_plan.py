"""What ``make deploy`` runs, decided from samconfig.toml and the ARGS before anything is built.

Run by scripts/sam.sh with the project's Python 3.12:

    deploy_plan.py environment ENV
        refuses (status 2) an ENV samconfig.toml does not have, naming those it has
    deploy_plan.py deploy ENV INTERACTIVE [SAM ARGS]
        prints, NUL-separated, "guided" or "direct", then the arguments for
        ``sam deploy``; refuses (status 2), saying why, a deploy that would fail
        or would wait for an answer no one can give (INTERACTIVE is 0 without a
        terminal, as in CI)

``--parameter-overrides`` in the ARGS are merged into the environment's own,
the ARGS winning: sam itself would take the ARGS' list instead of the file's,
dropping the environment's reviewed settings, when CI means to add only the
account's own values (ARNs, subnets) that the repository does not hold. A
deploy that does not ask passes the merged list, with ``ConfigurationDigest``
(``configuration_digest``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any, NoReturn

CONFIG = Path("samconfig.toml")
TEMPLATE = Path("template.yaml")
PLACEHOLDER = "REPLACE_ME"
DIGEST_PARAMETER = "ConfigurationDigest"


def refuse(message: str) -> NoReturn:
    """Say what is wrong and what to do, and stop with the status for a refused request."""
    print(f"error: {message}", file=sys.stderr)  # noqa: T201 - a command-line script
    sys.exit(2)


def load() -> dict[str, Any]:
    try:
        with CONFIG.open("rb") as config_file:
            return tomllib.load(config_file)
    except FileNotFoundError:
        return {}


def check_environment(config: dict[str, Any], env: str) -> None:
    # An environment that does not exist would deploy SAM's defaults under a name
    # nobody reviewed.
    known = sorted(name for name, table in config.items() if isinstance(table, dict))
    if env not in known:
        refuse(
            f"samconfig.toml has no [{env}] environment (CONFIG_ENV={env}); expected one of "
            f"{', '.join(known) or 'none: the file is missing'}. Add [{env}.global.parameters] "
            f"and [{env}.deploy.parameters] to samconfig.toml (as [prod] has), or choose one "
            "of those"
        )


def key_of(entry: str) -> str:
    """The parameter an override names: ``Key=Value`` or ``ParameterKey=Key,ParameterValue=…``."""
    if entry.startswith("ParameterKey="):
        return entry.removeprefix("ParameterKey=").partition(",")[0]
    return entry.partition("=")[0]


def value_of(entry: str) -> str:
    if entry.startswith("ParameterKey="):
        value = entry.partition(",ParameterValue=")[2]
    else:
        value = entry.partition("=")[2]
    return value.strip("\"'")


def split_overrides(args: list[str]) -> tuple[list[str], list[str]]:
    """The ARGS without their ``--parameter-overrides``, and those overrides, word by word."""
    rest: list[str] = []
    given: list[str] = []
    position = 0
    while position < len(args):
        if args[position] == "--parameter-overrides":
            position += 1
            # sam's option takes every word up to the next option.
            while position < len(args) and not args[position].startswith("--"):
                given.extend(shlex.split(args[position]))
                position += 1
            continue
        rest.append(args[position])
        position += 1
    return rest, given


def configuration_digest(overrides: dict[str, str]) -> str:
    """16 hex digits naming the parameters this deploy gives and the template they go to.

    SAM publishes a new version for an alias only when the template's text or
    the code's location changes, never for a parameter's value alone; the
    template's ``AutoPublishCodeSha256: !Ref ConfigurationDigest`` makes a new
    digest do it. Parameters left out keep their previous value, unchanged.
    """
    digest = hashlib.sha256(TEMPLATE.read_bytes() if TEMPLATE.is_file() else b"")
    for key in sorted(overrides):
        digest.update(b"\0" + overrides[key].encode("utf-8"))
    return digest.hexdigest()[:16]


def plan_deploy(
    config: dict[str, Any], env: str, args: list[str], *, interactive: bool
) -> list[str]:
    check_environment(config, env)
    deploy = config[env].get("deploy", {}).get("parameters", {})
    in_file = deploy.get("parameter_overrides", [])
    in_file = shlex.split(in_file) if isinstance(in_file, str) else list(in_file)
    rest, given = split_overrides(args)
    merged = {key_of(entry): entry for entry in in_file}
    merged.update({key_of(entry): entry for entry in given})
    placeholders = [key for key, entry in merged.items() if PLACEHOLDER in entry]
    guided = "--guided" in rest or not merged or bool(placeholders)
    if guided and not interactive:
        missing = ", ".join(placeholders) if placeholders else "every parameter (it names none)"
        refuse(
            f"samconfig.toml's [{env}] still holds {PLACEHOLDER} for {missing}, and there is "
            "no terminal for sam deploy --guided to ask on; pass them in ARGS (make deploy "
            "ARGS='--parameter-overrides Name=value ...', merged into the file's), or fill "
            "them in samconfig.toml"
        )
    confirms = deploy.get("confirm_changeset", False) and "--no-confirm-changeset" not in rest
    if confirms and not interactive:
        refuse(
            f"samconfig.toml's [{env}] confirms its change set (confirm_changeset = true) and "
            "there is no terminal to confirm it on; pass ARGS=--no-confirm-changeset where "
            "the pipeline reviews the change set itself"
        )
    if not guided and not value_of(merged.get("AlarmTopicArn", "AlarmTopicArn=")):
        silent = (
            f"[{env}] deploys with no AlarmTopicArn: its alarms (errors, failed runs, the "
            "heartbeat) would notify no one"
        )
        if env.startswith("prod") and not os.environ.get("ALLOW_NO_ALARM_TOPIC"):
            refuse(
                f"{silent}; pass AlarmTopicArn=arn:aws:sns:... (in ARGS or samconfig.toml), "
                "or ALLOW_NO_ALARM_TOPIC=1 to deploy silent alarms on purpose"
            )
        banner = "*" * 78
        print(f"{banner}\nWARNING: {silent}.\n{banner}", file=sys.stderr)  # noqa: T201
    if guided:
        # A first deploy publishes its versions anyway; what --guided saves to
        # samconfig.toml stays free of a digest that is stale at the next deploy.
        overrides = list(merged.values()) if given else []
    else:
        own = {key: entry for key, entry in merged.items() if key != DIGEST_PARAMETER}
        digest = f"{DIGEST_PARAMETER}={configuration_digest(own)}"
        overrides = [*own.values(), merged.get(DIGEST_PARAMETER, digest)]
    plan = ["guided" if guided else "direct"]
    if overrides:
        plan += ["--parameter-overrides", *overrides]
    return plan + rest


def main(argv: list[str]) -> None:
    usage = "usage: deploy_plan.py environment ENV | deploy ENV 0|1 [SAM ARGS]"
    if len(argv) >= 2 and argv[0] == "environment":
        check_environment(load(), argv[1])
    elif len(argv) >= 3 and argv[0] == "deploy" and argv[2] in ("0", "1"):
        plan = plan_deploy(load(), argv[1], argv[3:], interactive=argv[2] == "1")
        sys.stdout.write("\0".join(plan) + "\0")
    else:
        refuse(usage)


if __name__ == "__main__":
    main(sys.argv[1:])

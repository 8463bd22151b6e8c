"""``python -m dispatch_fn schedule status|pause|resume STACK``: the kill switch, and what it says.

The one way to stop and restart dispatching in production is the stack's own
``DispatchScheduleState`` parameter (docs/operations.md#pausing-dispatching).
``pause`` and ``resume`` update the deployed stack with its previous template
and every other parameter as it was, changing only that one: nothing is
built, no other code or setting goes out with it, and the stack never
disagrees with the schedule (``aws scheduler update-schedule`` would leave the
stack saying ENABLED over a disabled schedule, and the next deploy would
silently turn it back on). A paused stack's heartbeat alarm pages no one.

``status`` says what the stack says, what the schedule itself says, whether
the two disagree, and when the schedule next runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from dispatch_fn.errors import ConfigurationError

PARAMETER: Final = "DispatchScheduleState"
ENABLED: Final = "ENABLED"
DISABLED: Final = "DISABLED"
# The stack's output naming the schedule (template.yaml), in Scheduler's default group.
_SCHEDULE_OUTPUT: Final = "ScheduleName"
# The schedule expressions the template writes: cron(0 1 * * ? *) and cron(0 1/N * * ? *).
_HOURLY_CRON: Final = re.compile(r"cron\((\d{1,2}) (\d{1,2})(?:/(\d{1,2}))? \* \* \? \*\)")


@dataclass(frozen=True, slots=True)
class Status:
    """What the stack and its schedule say about dispatching."""

    stack: str
    stack_status: str
    parameter: str | None
    schedule: str | None
    state: str | None
    expression: str | None
    timezone: str | None
    next_run: datetime | None

    @property
    def drifted(self) -> bool:
        """Whether the schedule's state is not the one the stack deployed."""
        return (
            self.state is not None and self.parameter is not None and self.state != self.parameter
        )

    def lines(self) -> list[str]:
        """The status as a person reads it."""
        where = f"{self.expression} {self.timezone or 'UTC'}" if self.expression else "-"
        said = [
            f"stack       {self.stack} ({self.stack_status})",
            f"parameter   {PARAMETER} = {self.parameter or '-'}",
            f"schedule    {self.schedule or '-'}: {self.state or 'not found'}, {where}",
            "next run    "
            + (self.next_run.isoformat() if self.next_run else "none (the schedule is paused)"
               if self.state == DISABLED else "unknown"),
        ]  # fmt: skip
        if self.drifted:
            said.append(
                f"drift       the schedule is {self.state} but the stack deployed {self.parameter}:"
                " it was changed outside CloudFormation, and the next deploy puts it back;"
                f" `schedule {'pause' if self.state == DISABLED else 'resume'}` makes the stack"
                " agree"
            )
        return said


def next_run(expression: str, after: datetime) -> datetime | None:
    """The first time after ``after`` (UTC) that ``expression`` fires, for the template's crons.

    None for an expression the template does not write (then a person reads it).
    """
    matched = _HOURLY_CRON.fullmatch(expression)
    if matched is None:
        return None
    minute, first_hour, every = int(matched[1]), int(matched[2]), int(matched[3] or 24)
    hours = range(first_hour, 24, every)
    day = after.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    for offset in (0, 1):
        for hour in hours:
            candidate = day + timedelta(days=offset, hours=hour, minutes=minute)
            if candidate > after:
                return candidate
    return None  # pragma: no cover - the first hour of the next day always follows


def _stack(cloudformation: Any, stack: str) -> Mapping[str, Any]:
    stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    if not stacks:
        raise ConfigurationError(f"no stack {stack!r}; expected the dispatcher's stack name")
    found: Mapping[str, Any] = stacks[0]
    return found


def _parameter(described: Mapping[str, Any]) -> str | None:
    for parameter in described.get("Parameters", []):
        if parameter["ParameterKey"] == PARAMETER:
            return str(parameter["ParameterValue"])
    return None


def status(cloudformation: Any, scheduler: Any, stack: str, *, now: datetime) -> Status:
    """What ``stack`` deployed, what its schedule says, and its next run after ``now``."""
    described = _stack(cloudformation, stack)
    outputs = {out["OutputKey"]: out["OutputValue"] for out in described.get("Outputs", [])}
    name = outputs.get(_SCHEDULE_OUTPUT)
    schedule: Mapping[str, Any] = {}
    if name is not None:
        schedule = scheduler.get_schedule(Name=name)
    state = schedule.get("State")
    expression = schedule.get("ScheduleExpression")
    return Status(
        stack=stack,
        stack_status=str(described.get("StackStatus")),
        parameter=_parameter(described),
        schedule=name,
        state=state,
        expression=expression,
        timezone=schedule.get("ScheduleExpressionTimezone"),
        next_run=next_run(expression, now) if expression and state == ENABLED else None,
    )


def set_state(cloudformation: Any, stack: str, state: str) -> bool:
    """Deploy ``stack`` again as it is, with ``DispatchScheduleState`` = ``state``.

    Returns False when the stack already says so (nothing to update). The
    previous template and every other parameter's previous value go with it,
    so the update changes the schedule's state and nothing else.
    """
    if state not in (ENABLED, DISABLED):
        raise ValueError(f"schedule state {state!r}; expected {ENABLED} or {DISABLED}")
    described = _stack(cloudformation, stack)
    current = _parameter(described)
    if current is None:
        raise ConfigurationError(
            f"stack {stack!r} has no {PARAMETER} parameter; expected the dispatcher's stack"
        )
    if current == state:
        return False
    parameters = [
        {"ParameterKey": PARAMETER, "ParameterValue": state}
        if parameter["ParameterKey"] == PARAMETER
        else {"ParameterKey": parameter["ParameterKey"], "UsePreviousValue": True}
        for parameter in described.get("Parameters", [])
    ]
    cloudformation.update_stack(
        StackName=stack,
        UsePreviousTemplate=True,
        Parameters=parameters,
        # What the SAM template needs: its transform, and the roles it names.
        Capabilities=described.get("Capabilities")
        or ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    return True

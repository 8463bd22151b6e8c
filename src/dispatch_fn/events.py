"""The invocation contract (SPEC §5): one pydantic model per event shape.

``parse_event`` turns whatever Lambda was handed into a ``RunRequest`` or
raises ``EventError`` naming the problem; nothing runs before it returns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from dispatch_fn.continuation import MAX_CONTINUATIONS
from dispatch_fn.dispatch import RunRequest
from dispatch_fn.errors import EventError
from dispatch_fn.plan import Window
from dispatch_fn.store import Scope

DEFAULT_MAX_WINDOW_DAYS: Final = 1827  # five years, leap days included
_DATE_SHAPE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


def _strict_date(value: object) -> date:
    # pydantic would also take a number of seconds or a datetime; an operator
    # who typed either meant something else, so only YYYY-MM-DD is a date here.
    if not isinstance(value, str) or not _DATE_SHAPE.fullmatch(value):
        # pydantic reports a ValueError as a validation error; a TypeError would escape.
        raise ValueError(f"expected a date as 'YYYY-MM-DD', got {value!r}")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a calendar date") from None


def _instant(value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError(  # noqa: TRY004 - see _strict_date
            f"expected an ISO 8601 instant such as '2026-11-29T01:00:00Z', got {value!r}"
        )
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not an ISO 8601 instant such as '2026-11-29T01:00:00Z'"
        ) from None
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset; an instant needs one (e.g. 'Z')")
    return parsed.astimezone(UTC)


type StrictDate = Annotated[date, BeforeValidator(_strict_date)]
type Instant = Annotated[datetime, BeforeValidator(_instant)]


class ScheduledRuleEvent(BaseModel):
    """The classic EventBridge rule envelope; its ``time`` is the run's clock."""

    # AWS owns this envelope and may add fields; only the ones we use are checked.
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")
    time: Instant


class SchedulerEvent(BaseModel):
    """EventBridge Scheduler's payload, carrying ``<aws.scheduler.scheduled-time>``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheduled_time: Instant


class ManualEvent(BaseModel):
    """A console or CLI payload: ``{}``, ``{"now"}``, or a ``{"from", "to"}`` backfill."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    now: Instant | None = None
    from_date: StrictDate | None = Field(default=None, alias="from")
    to_date: StrictDate | None = Field(default=None, alias="to")
    dry_run: bool = Field(default=False, strict=True)
    organization_id: str | None = Field(default=None, min_length=1)
    duty_ids: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)
    resume_after: str | None = Field(default=None, min_length=1)
    continuation: int = Field(default=0, ge=0, le=MAX_CONTINUATIONS, strict=True)


def parse_event(
    event: object, *, current_time: datetime, max_window_days: int = DEFAULT_MAX_WINDOW_DAYS
) -> RunRequest:
    """The run an event asks for; raise ``EventError`` if it is not one we accept.

    ``current_time`` is the clock for payloads that carry none.
    """
    if not isinstance(event, Mapping):
        raise EventError(f"event must be a JSON object, got {type(event).__name__}")
    if "detail-type" in event:
        rule = _validate(ScheduledRuleEvent, event)
        return RunRequest(now=rule.time)
    if "scheduled_time" in event:
        scheduler = _validate(SchedulerEvent, event)
        return RunRequest(now=scheduler.scheduled_time)
    manual = _validate(ManualEvent, event)
    now = manual.now or current_time
    scope = Scope(
        organization_id=manual.organization_id,
        duty_ids=None if manual.duty_ids is None else tuple(manual.duty_ids),
    )
    window = _window(manual, now, max_window_days)
    return RunRequest(
        now=now,
        window=window,
        dry_run=manual.dry_run,
        scope=scope,
        resume_after=manual.resume_after,
        continuation=manual.continuation,
    )


def _window(manual: ManualEvent, now: datetime, max_window_days: int) -> Window | None:
    if manual.from_date is None:
        if manual.to_date is not None:
            raise EventError(
                "'to' without 'from' would backfill since the beginning of time; "
                "give 'from' as well"
            )
        return None
    # 'from' alone runs up to each duty's own today; the cap is measured to the
    # latest today anywhere (UTC+14), so no zone can stretch the window past it.
    last = manual.to_date or (now + timedelta(hours=14)).date()
    if last < manual.from_date:
        raise EventError(
            f"'to' ({last.isoformat()}) is before 'from' ({manual.from_date.isoformat()}); "
            "a window runs forwards"
        )
    days = (last - manual.from_date).days + 1
    if days > max_window_days:
        raise EventError(
            f"window {manual.from_date.isoformat()}..{last.isoformat()} spans {days} days; "
            f"at most {max_window_days} are allowed (DISPATCH_MAX_WINDOW_DAYS)"
        )
    return Window(manual.from_date, manual.to_date)


def _validate[M: BaseModel](model: type[M], event: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(dict(event))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'event'}: {_message(error)}"
            for error in exc.errors()
        )
        raise EventError(f"refused {model.__name__} event: {problems}") from None


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    return str(error["msg"]).removeprefix("Value error, ")

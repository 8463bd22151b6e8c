"""The invocation contract (docs/contract.md#events): which runs an event may ask for.

``parse_event`` turns whatever Lambda was handed into a ``RunRequest`` or
raises ``EventError`` naming the field; nothing runs before it returns. A
message quotes at most a short prefix of what it refuses, however large or
deep the value. Nothing here talks to a database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from dispatch_fn.bounded import MAX_EVENT_BYTES, quote
from dispatch_fn.engine import LAST_DAY, MAX_YEAR, MIN_YEAR, YEAR_RANGE
from dispatch_fn.errors import EventError
from dispatch_fn.planning import MODES, SCHEDULE_INTERVAL, SHOWN_STATUSES, RunRequest, Scope, Window
from dispatch_fn.settings import DEFAULT_MAX_DUTY_IDS, DEFAULT_MAX_WINDOW_DAYS

# A run that keeps stopping for its deadline hands off at most 20 times
# (docs/contract.md#continuation).
MAX_CONTINUATION: Final = 20
# The fields only a manual payload may carry (docs/contract.md#events, #continuation).
MANUAL_FIELDS: Final = (
    "now", "from", "to", "dry_run", "organization_id", "duty_ids", "resume_after", "continuation",
)  # fmt: skip
# Longer than any id duly_task's unique index can hold (2,704 bytes a row), so
# no real duty or organisation is shut out, and a megabyte never reaches SQL.
MAX_ID_CHARS: Final = 2048
# A run's continuation carries its scope in an asynchronous Invoke
# (MAX_EVENT_BYTES). A scope that would not fit is refused here, before
# anything runs, with room kept for the event's other fields (a resume_after
# of the longest id among them).
# The run-ledger query's page of rows (docs/contract.md#queries).
DEFAULT_RUNS_LIMIT: Final = 20
MAX_RUNS_LIMIT: Final = 100
MAX_SCOPE_BYTES: Final = MAX_EVENT_BYTES - 16 * 1024
_DATE_SHAPE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
_INSTANT_EXAMPLE: Final = "'2026-11-29T01:00:00Z'"
# The latest local "today" anywhere is UTC+14.
_LATEST_OFFSET: Final = timedelta(hours=14)
_PROBLEMS_SHOWN: Final = 3


# pydantic reports a ValueError raised in a validator as a validation error
# (a TypeError would escape), hence ValueError for wrong types too.


def _strict_date(value: object) -> date:
    # pydantic would also take a number of seconds or a datetime; an operator
    # who typed either meant something else, so only YYYY-MM-DD is a date here.
    if not isinstance(value, str) or not _DATE_SHAPE.fullmatch(value):
        raise ValueError(f"expected a date as 'YYYY-MM-DD', got {quote(value)}")
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{quote(value)} is not a calendar date") from None
    if not MIN_YEAR <= day.year <= MAX_YEAR:
        raise ValueError(f"{quote(value)} is outside {YEAR_RANGE}")
    return day


def _instant(value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError(  # noqa: TRY004 - see above
            f"expected an ISO 8601 instant such as {_INSTANT_EXAMPLE}, got {quote(value)}"
        )
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{quote(value)} is not an ISO 8601 instant such as {_INSTANT_EXAMPLE}"
        ) from None
    if parsed.tzinfo is None:
        raise ValueError(f"{quote(value)} has no UTC offset; an instant needs one (e.g. 'Z')")
    try:
        instant = parsed.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 shifted past the end of datetime's range
        instant = None
    if instant is None or not MIN_YEAR <= instant.year <= MAX_YEAR:
        raise ValueError(f"{quote(value)} is outside {YEAR_RANGE} (in UTC)")
    return instant


def _identifier(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {quote(value)}")  # noqa: TRY004
    if not value:
        raise ValueError("expected a non-empty string, got ''")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"{quote(value)} is too long; at most {MAX_ID_CHARS} characters")
    if "\x00" in value:
        raise ValueError(f"{quote(value)} contains a NUL character, which no id can hold")
    return value


def _continuation(value: object) -> int:
    expected = f"expected an integer from 1 to {MAX_CONTINUATION}"
    if isinstance(value, bool):
        raise ValueError(f"{expected}, not a boolean ({value!r})")  # noqa: TRY004
    if not isinstance(value, int):
        raise ValueError(f"{expected}, got {quote(value)}")  # noqa: TRY004
    if not 1 <= value <= MAX_CONTINUATION:
        raise ValueError(f"{expected}, got {quote(value)}; a run hands off at most 20 times")
    return value


def day_of(value: object) -> date:
    """A ``YYYY-MM-DD`` day as an event's date fields read it; ``ValueError`` says what is wrong."""
    return _strict_date(value)


def instant_of(value: object) -> datetime:
    """An ISO 8601 instant as an event's clock reads it; ``ValueError`` says what is wrong."""
    return _instant(value)


type StrictDate = Annotated[date, BeforeValidator(_strict_date)]
type Instant = Annotated[datetime, BeforeValidator(_instant)]
type Identifier = Annotated[str, BeforeValidator(_identifier)]
type Continuation = Annotated[int, BeforeValidator(_continuation)]


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
    organization_id: Identifier | None = None
    duty_ids: list[Identifier] | None = Field(default=None, min_length=1)
    resume_after: Identifier | None = None
    continuation: Continuation = 0


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(value: object) -> str:
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {quote(value)}")
        return value

    return BeforeValidator(check)


class RunsQueryEvent(BaseModel):
    """``{"query": "runs", "limit"?, "mode"?, "status"?}`` or ``{"query": "runs", "run_id"}``.

    The run ledger newest first, filtered as ``runs --mode --status``; or one run
    whole, as ``runs show ID`` (docs/contract.md#queries).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: Literal["runs"]
    limit: int = Field(default=DEFAULT_RUNS_LIMIT, ge=1, le=MAX_RUNS_LIMIT, strict=True)
    mode: Annotated[str, _one_of(MODES)] | None = None
    status: Annotated[str, _one_of(SHOWN_STATUSES)] | None = None
    # A ledger id is a PostgreSQL bigint.
    run_id: int | None = Field(default=None, ge=1, le=2**63 - 1, strict=True)


class ExplainQueryEvent(BaseModel):
    """``{"query": "explain", "duty_id", "organization_id"?, "now"?, "from"?, "to"?}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    query: Literal["explain"]
    duty_id: Identifier
    organization_id: Identifier | None = None
    now: Instant | None = None
    from_date: StrictDate | None = Field(default=None, alias="from")
    to_date: StrictDate | None = Field(default=None, alias="to")


@dataclass(frozen=True, slots=True)
class Query:
    """A read-only question to the function: it writes nothing and runs nothing.

    See docs/contract.md#queries.
    """

    kind: Literal["runs", "explain"]
    limit: int = DEFAULT_RUNS_LIMIT
    mode: str | None = None
    status: str | None = None
    run_id: int | None = None
    duty_id: str | None = None
    organization_id: str | None = None
    now: datetime | None = None
    window: Window | None = None


def is_query(event: object) -> bool:
    """Whether ``event`` asks a read-only question rather than for a run."""
    return isinstance(event, Mapping) and "query" in event


def parse_query(event: Mapping[str, Any], *, current_time: datetime, max_window_days: int) -> Query:
    """The question a ``{"query": ...}`` event asks; raise ``EventError`` if it is not one."""
    _refuse_surrogates(event)
    kind = event.get("query")
    if kind == "runs":
        runs = _validate(RunsQueryEvent, event)
        listing = [name for name in ("limit", "mode", "status") if name in event]
        if runs.run_id is not None and listing:
            raise EventError(
                f"run_id names one run; {', '.join(listing)} filter a list of runs: "
                "send one or the other"
            )
        return Query(
            "runs", limit=runs.limit, mode=runs.mode, status=runs.status, run_id=runs.run_id
        )
    if kind == "explain":
        asked = _validate(ExplainQueryEvent, event)
        now = asked.now or current_time
        return Query(
            "explain",
            duty_id=asked.duty_id,
            organization_id=asked.organization_id,
            now=now,
            window=_window(asked, now, max_window_days),
        )
    raise EventError(f"query: {quote(kind)}; expected 'runs' or 'explain'")


def parse_event(
    event: object,
    *,
    current_time: datetime,
    max_window_days: int = DEFAULT_MAX_WINDOW_DAYS,
    max_duty_ids: int = DEFAULT_MAX_DUTY_IDS,
    interval: timedelta = SCHEDULE_INTERVAL,
) -> RunRequest:
    """The run an event asks for; raise ``EventError`` if it is not one we accept.

    ``current_time`` is the clock for payloads that carry none; ``interval``
    the time since the previous scheduled clock.
    """
    if not isinstance(event, Mapping):
        raise EventError(f"event must be a JSON object, got {quote(event)}")
    _refuse_surrogates(event)
    envelopes = [name for name in ("detail-type", "scheduled_time") if name in event]
    if len(envelopes) > 1:
        raise EventError(
            "event carries both schedule envelopes ('detail-type' and 'scheduled_time'); "
            "a schedule sends one"
        )
    if envelopes:
        carried = [name for name in MANUAL_FIELDS if name in event]
        if carried:
            raise EventError(
                f"a schedule envelope ({envelopes[0]!r}) takes no manual fields, got "
                f"{', '.join(map(repr, carried))}; send a manual payload (e.g. "
                f'{{"now": ..., "dry_run": true}}) instead'
            )
        if envelopes[0] == "detail-type":
            return RunRequest(now=_validate(ScheduledRuleEvent, event).time, interval=interval)
        return RunRequest(now=_validate(SchedulerEvent, event).scheduled_time, interval=interval)
    duty_ids = event.get("duty_ids")
    # Checked before validation, which would otherwise look at every one of them.
    if isinstance(duty_ids, list | tuple) and len(duty_ids) > max_duty_ids:
        raise EventError(
            f"duty_ids: {len(duty_ids)} ids; at most {max_duty_ids} are allowed "
            "(DISPATCH_MAX_DUTY_IDS): scope by organization_id, or split the run"
        )
    manual = _validate(ManualEvent, event)
    _check_scope_fits(manual)
    now = manual.now or current_time
    return RunRequest(
        now=now,
        window=_window(manual, now, max_window_days),
        dry_run=manual.dry_run,
        scope=Scope(
            organization_id=manual.organization_id,
            duty_ids=None if manual.duty_ids is None else tuple(manual.duty_ids),
            resume_after=manual.resume_after,
        ),
        continuation=manual.continuation,
        interval=interval,
    )


def _check_scope_fits(manual: ManualEvent) -> None:
    scope = {"organization_id": manual.organization_id, "duty_ids": manual.duty_ids}
    size = len(json.dumps(scope).encode("utf-8"))
    if size > MAX_SCOPE_BYTES:
        raise EventError(
            f"duty_ids: the scope takes {size} bytes as JSON; at most {MAX_SCOPE_BYTES} "
            "fit the continuation a long run hands itself (an asynchronous invocation "
            "takes 256 KiB): scope by organization_id, or split the run"
        )


def _window(
    manual: ManualEvent | ExplainQueryEvent, now: datetime, max_window_days: int
) -> Window | None:
    if manual.from_date is None:
        if manual.to_date is not None:
            raise EventError(
                "'to' without 'from' would backfill since the beginning of time; "
                "give 'from' as well"
            )
        return None
    # 'from' alone runs up to each duty's own today; the cap is measured to the
    # latest today anywhere, so no zone can stretch the window past it.
    last = manual.to_date or _latest_today(now)
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


def _latest_today(now: datetime) -> date:
    try:
        return (now + _LATEST_OFFSET).date()
    except OverflowError:  # past 9999-12-31, which is then everyone's last day
        return LAST_DAY


def _refuse_surrogates(event: Mapping[Any, Any]) -> None:
    if (where := _not_utf8(event)) is not None:
        # JSON's "\\ud800" escape decodes to a lone surrogate, which PostgreSQL
        # text, the ledger and every log line refuse; refused here, not there.
        raise EventError(
            f"{where}: holds a lone surrogate (such as '\\ud800'), which is not Unicode "
            "text: UTF-8 cannot encode it, so no id or field can hold it"
        )


def _not_utf8(event: Mapping[Any, Any]) -> str | None:
    """Where the first string UTF-8 cannot encode lies (its top-level field), or None."""
    # A loop, not recursion: a value nested thousands deep is walked like a flat one.
    pending: list[tuple[str, object]] = []
    for key, value in event.items():
        if isinstance(key, str) and not _encodes(key):
            return "a field name"
        pending.append((key if isinstance(key, str) and len(key) <= 40 else quote(key), value))
    while pending:
        where, value = pending.pop()
        if isinstance(value, str):
            if not _encodes(value):
                return where
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and not _encodes(key):
                    return where
                pending.append((where, item))
        elif isinstance(value, list | tuple):
            pending.extend((where, item) for item in value)
    return None


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _validate[M: BaseModel](model: type[M], event: Mapping[Any, Any]) -> M:
    try:
        return model.model_validate(dict(event))
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        problems = [
            f"{_where(error['loc'])}: {_message(error)}" for error in errors[:_PROBLEMS_SHOWN]
        ]
        if len(errors) > _PROBLEMS_SHOWN:
            problems.append(f"and {len(errors) - _PROBLEMS_SHOWN} more problem(s)")
        # The field and what it expects; the model's class name means nothing to the sender.
        raise EventError("; ".join(problems)) from None


def _where(loc: tuple[int | str, ...]) -> str:
    parts = [part if isinstance(part, str) and len(part) <= 40 else quote(part) for part in loc]
    return ".".join(str(part) for part in parts) or "event"


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    return str(error["msg"]).removeprefix("Value error, ")[:300]

"""What the generated duties look like: organisations, zones, and every column's weights.

Every weighted choice is in permille and sums to 1000. A value that is a
``Tail`` means "the row's uniform draw over the whole legal range": people
pick round numbers mostly, but any value occurs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Tail:
    """A choice that takes the row's uniform draw in the named column."""

    column: str


type Choice = tuple[str | int | Tail | None, int]

# About a thousand organisations; one of them (BIG_ORG) holds exactly M duties,
# spread evenly over the id range, so the backfill is an ordinary
# organisation-scoped run, the way an operator would ask for one.
ORGANISATIONS: Final = 1000
BIG_ORG: Final = "org-0000"
OWNERS_PER_ORG: Final = 60
BUSINESS_UNITS_PER_ORG: Final = 10

# Forty zones, the awkward ones included: half-hour and 45-minute offsets
# (Kathmandu, Chatham, St John's), a half-hour DST shift (Lord Howe), a DST
# change at midnight (Santiago), the southern hemisphere, and zones without DST.
ZONES: Final = (
    "UTC", "Asia/Shanghai", "America/Los_Angeles", "Europe/Berlin", "America/Santiago",
    "Pacific/Auckland", "Asia/Kathmandu", "Australia/Lord_Howe", "Europe/London",
    "Europe/Paris", "Europe/Madrid", "Europe/Rome", "Europe/Amsterdam", "Europe/Zurich",
    "Europe/Stockholm", "Europe/Warsaw", "Europe/Istanbul", "Europe/Moscow",
    "Africa/Johannesburg", "Africa/Lagos", "Africa/Cairo", "Asia/Dubai", "Asia/Kolkata",
    "Asia/Singapore", "Asia/Tokyo", "Asia/Seoul", "Asia/Hong_Kong", "Asia/Jakarta",
    "Asia/Tehran", "Australia/Sydney", "Australia/Adelaide", "America/New_York",
    "America/Chicago", "America/Denver", "America/Phoenix", "America/Toronto",
    "America/Mexico_City", "America/Sao_Paulo", "America/St_Johns", "Pacific/Chatham",
)  # fmt: skip
# Most of an organisation's duties live in its home zone; the rest anywhere.
HOME_ZONE_PERMILLE: Final = 900

NAMES: Final = (
    "File the emissions return", "Review supplier access rights", "Reconcile the petty cash",
    "Test the fire alarms", "Submit the VAT return", "Back up the payroll ledger",
    "Inspect the forklift", "Renew the waste carrier licence", "Check the first-aid kits",
    "Report health and safety incidents", "Rotate the admin passwords",
    "Calibrate the weighing scales",
)  # fmt: skip


# The holiday calendars of rolled due dates (docs/contract.md#due-dates): both hemispheres'
# weekends (SA: Friday and Saturday), subdivisions, and calendars with movable
# feasts (CN, IN, SA).
HOLIDAY_CALENDARS: Final = ("US", "US-CA", "DE-BY", "GB-SCT", "CN", "SA", "FR", "JP", "IN", "BR")


@dataclass(frozen=True, slots=True)
class Compliance:
    """The columns of duties as compliance teams write them.

    See docs/contract.md#due-dates, #one-run.
    """

    # For due_anchor 'after_period_end': months, then days, after the period.
    after_months: tuple[Choice, ...]
    after_days: tuple[Choice, ...]
    # Rolled due dates take one of HOLIDAY_CALENDARS; unrolled ones none.
    rolls: tuple[Choice, ...]
    grace_days: tuple[Choice, ...]
    review_statuses: tuple[Choice, ...]


@dataclass(frozen=True, slots=True)
class Mix:
    """The weights of one duty mix, column by column."""

    name: str
    forms: tuple[Choice, ...]
    # Drawn from the same number as ``forms``, so the two line up row by row.
    statuses: tuple[Choice, ...]
    frequencies: tuple[Choice, ...]
    anchors: tuple[Choice, ...]
    start_offsets: tuple[Choice, ...]
    end_offsets: tuple[Choice, ...]
    leads: tuple[Choice, ...]
    sources: tuple[Choice, ...]
    # Shares (permille) with an effective window's start, and its end.
    effective_from_permille: int
    effective_to_permille: int
    # None: the columns keep their defaults (approved, no grace, no roll).
    compliance: Compliance | None = None


# 10 % of duties are never dispatched: standing, one-off, paused or retired.
_FORMS: Final[tuple[Choice, ...]] = (("standing", 40), ("one_off", 20), ("recurring", 940))
_STATUSES: Final[tuple[Choice, ...]] = (
    ("active", 60),  # the standing and one-off duties above
    ("paused", 20),
    ("retired", 20),
    ("active", 900),
)
# Weighted to monthly and weekly.
_FREQUENCIES: Final[tuple[Choice, ...]] = (
    ("monthly", 400), ("weekly", 220), ("quarterly", 120), ("fortnightly", 80),
    ("annual", 70), ("daily", 60), ("semiannual", 50),
)  # fmt: skip
# Offsets -10..28: "the 1st, 5th, 10th, 15th, 20th, 25th, 28th" from the start,
# "the last day, the day before, ..." from the end, and a uniform tail.
_START_OFFSETS: Final[tuple[Choice, ...]] = (
    (0, 250), (4, 120), (9, 100), (14, 100), (19, 60), (24, 30), (27, 40),
    (Tail("any_offset"), 300),
)  # fmt: skip
_END_OFFSETS: Final[tuple[Choice, ...]] = (
    (0, 300), (-1, 150), (-2, 100), (-4, 80), (-6, 70), (Tail("any_offset"), 300),
)  # fmt: skip
# Leads 0..30: mostly a week or two, and a uniform tail.
_LEADS: Final[tuple[Choice, ...]] = (
    (7, 300), (14, 150), (3, 100), (5, 80), (0, 60), (30, 60), (10, 50), (1, 40), (21, 40),
    (Tail("any_lead"), 120),
)  # fmt: skip
_SOURCES: Final[tuple[Choice, ...]] = (("catalog", 500), ("assigned", 350), ("self", 150))

# The mix every figure of record was measured on: due dates from the period's
# start or end, nothing rolled, nothing under review.
CLASSIC: Final = Mix(
    name="classic",
    forms=_FORMS,
    statuses=_STATUSES,
    frequencies=_FREQUENCIES,
    anchors=(("period_start", 750), ("period_end", 250)),
    start_offsets=_START_OFFSETS,
    end_offsets=_END_OFFSETS,
    leads=_LEADS,
    sources=_SOURCES,
    # 12 % start on a day in 2024-01..2027-04 (some still in the future at the
    # clock), 8 % end on a day in 2025-06..2027-11 (some already over).
    effective_from_permille=120,
    effective_to_permille=80,
)

# Due after the period: "20 days after the quarter", "within 4 months of the
# year end"; months 0..4, days 0..30 with a uniform tail.
_AFTER_MONTHS: Final[tuple[Choice, ...]] = ((0, 450), (1, 250), (2, 120), (3, 100), (4, 80))
_AFTER_DAYS: Final[tuple[Choice, ...]] = (
    (0, 150), (15, 150), (20, 150), (30, 100), (10, 50), (Tail("any_after_days"), 400),
)  # fmt: skip
_ROLLS: Final[tuple[Choice, ...]] = (
    ("none", 750), ("following", 110), ("modified_following", 90), ("preceding", 50),
)  # fmt: skip
# Grace 0..30: mostly none or a week, and a uniform tail.
_GRACE_DAYS: Final[tuple[Choice, ...]] = (
    (0, 400), (5, 150), (3, 100), (7, 100), (10, 50), (14, 50), (30, 50),
    (Tail("any_grace"), 100),
)  # fmt: skip
# Mostly approved; a null review status is not approved either.
_REVIEW_STATUSES: Final[tuple[Choice, ...]] = (
    ("approved", 850), ("to_review", 60), ("to_confirm", 40), ("returned", 30), (None, 20),
)  # fmt: skip

# The classic mix with duties as compliance teams write them: a quarter due
# after the period, a quarter rolled to a business day on one of ten holiday
# calendars, grace of up to a month, and about one in seven held back by the
# review gate.
COMPLIANCE: Final = Mix(
    name="compliance",
    forms=_FORMS,
    statuses=_STATUSES,
    frequencies=_FREQUENCIES,
    anchors=(("period_start", 560), ("period_end", 190), ("after_period_end", 250)),
    start_offsets=_START_OFFSETS,
    end_offsets=_END_OFFSETS,
    leads=_LEADS,
    sources=_SOURCES,
    effective_from_permille=120,
    effective_to_permille=80,
    compliance=Compliance(
        after_months=_AFTER_MONTHS,
        after_days=_AFTER_DAYS,
        rolls=_ROLLS,
        grace_days=_GRACE_DAYS,
        review_statuses=_REVIEW_STATUSES,
    ),
)

MIXES: Final = {mix.name: mix for mix in (CLASSIC, COMPLIANCE)}

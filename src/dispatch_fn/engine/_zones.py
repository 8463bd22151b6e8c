"""IANA time zones, loaded from the pinned ``tzdata`` package only.

``ZoneInfo(name)`` would consult the host's ``TZPATH`` first, so the same code
could answer differently on a laptop, in CI and in Lambda. Reading the TZif
files out of the ``tzdata`` wheel pins every answer to one tz release.
"""

from __future__ import annotations

import functools
import importlib.resources
from zoneinfo import ZoneInfo

from dispatch_fn.errors import UnknownTimezoneError

_PACKAGE = "tzdata"
_ZONE_FILES = "tzdata.zoneinfo"


@functools.cache
def zone_names() -> frozenset[str]:
    """Every zone name the bundled tz release defines (links included)."""
    # The wheel ships its own list of zones; matching against it (rather than
    # probing the file system) refuses '..', absolute paths, 'zone.tab' and
    # wrong-case names without reasoning about paths at all.
    listing = importlib.resources.files(_PACKAGE).joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in listing.splitlines() if line.strip())


def load_zone(name: str) -> ZoneInfo:
    """Read zone ``name`` from the tzdata wheel, uncached (``zone`` caches it)."""
    resource = importlib.resources.files(_ZONE_FILES).joinpath(*name.split("/"))
    with resource.open("rb") as tzif:
        return ZoneInfo.from_file(tzif, key=name)


@functools.cache
def _cached_zone(name: str) -> ZoneInfo:
    return load_zone(name)


def zone(timezone: str) -> ZoneInfo:
    """The validated IANA zone ``timezone``, parsed once per process."""
    # Checked before the cache: an unhashable argument would otherwise fail
    # inside functools with a TypeError instead of the documented error.
    if not isinstance(timezone, str):
        raise UnknownTimezoneError(
            f"time zone must be a str, got {timezone!r}; expected an IANA zone name "
            "such as 'Europe/Berlin' or 'UTC'"
        )
    if timezone not in zone_names():
        raise UnknownTimezoneError(
            f"unknown time zone {timezone!r}; expected an IANA zone name "
            "such as 'Europe/Berlin' or 'UTC'"
        )
    return _cached_zone(timezone)

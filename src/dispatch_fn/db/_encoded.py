"""Parameters dumped once and bound as they are, page after page.

A run binds the same schedules, periods and roll days to every one of its
pages: thousands of array elements that psycopg would otherwise dump again
for each page, in the one Python process whose threads share the
interpreter lock while the run's connections wait on their pages
(docs/performance-history.md#client-side has the figures). ``encode`` dumps a value
once, in binary; the dumper registered here sends those bytes, typed as
psycopg typed them, through a ``%s`` placeholder as through a ``%b`` one,
so each statement casts what it binds (every page statement does).

The dumper is registered on psycopg's global adapters when this module is
imported; a connection copies them when it is made, so it serves the
connections made after the data layer (``store``) is imported.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import adapt, pq
from psycopg.abc import Buffer, DumperKey


@dataclass(frozen=True, slots=True)
class Encoded:
    """A value in PostgreSQL's binary form, with the type psycopg chose for it."""

    data: bytes
    oid: int


def encode(value: Any) -> Any:
    """``value`` dumped once in binary, or ``value`` itself where psycopg dumps it as text.

    An empty list, for one, goes as text (``'{}'`` of an unknown type) so
    that the server types it from its context: it stays as it is.
    """
    transformer = adapt.Transformer()
    dumped = transformer.dump_sequence([value], [adapt.PyFormat.BINARY])[0]
    formats, types = transformer.formats, transformer.types
    if dumped is None or not formats or not types or formats[0] != pq.Format.BINARY:
        return value
    return Encoded(bytes(dumped), types[0])


@functools.cache
def _type_key(oid: int) -> type:
    # A dumper key is made of types: one stands for each PostgreSQL type.
    return type(f"_Oid{oid}", (), {})


class _EncodedDumper(adapt.Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Encoded) -> Buffer:
        return obj.data

    def get_key(self, obj: Encoded, format: adapt.PyFormat) -> DumperKey:
        # One dumper per type: psycopg caches dumpers by this key.
        return (self.cls, _type_key(obj.oid))

    def upgrade(self, obj: Encoded, format: adapt.PyFormat) -> adapt.Dumper:
        dumper = type(self)(self.cls)
        dumper.oid = obj.oid
        return dumper


psycopg.adapters.register_dumper(Encoded, _EncodedDumper)

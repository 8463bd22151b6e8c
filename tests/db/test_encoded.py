"""Parameters dumped once bind as psycopg would have bound them, page after page."""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from dispatch_fn.db import store
from dispatch_fn.db._encoded import Encoded, encode
from dispatch_fn.planning import Scope, plan
from support import NOW

_ARRAYS = st.one_of(
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1),
    st.lists(
        st.one_of(
            st.none(),
            st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00")),
        ),
        min_size=1,
    ),
    st.lists(st.one_of(st.none(), st.dates(min_value=date(1, 1, 1))), min_size=1),
    st.lists(st.booleans(), min_size=1),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=_ARRAYS.filter(lambda value: any(each is not None for each in value)))
def test_an_encoded_array_reaches_the_server_as_the_array_itself(
    conn: psycopg.Connection[Any], value: list[Any]
) -> None:
    encoded = encode(value)

    assert isinstance(encoded, Encoded)
    row = conn.execute(
        "SELECT %(encoded)b, %(raw)b, pg_typeof(%(encoded)b) = pg_typeof(%(raw)b)",
        {"encoded": encoded, "raw": value},
    ).fetchone()
    assert row == (value, value, True)


def test_a_list_without_a_typed_element_is_left_for_the_server_to_type_from_its_context(
    conn: psycopg.Connection[Any],
) -> None:
    assert encode([]) == []
    assert encode([None, None]) == [None, None]
    assert conn.execute("SELECT %(x)b::text[]", {"x": encode([None])}).fetchone() == ([None],)
    assert conn.execute("SELECT %(x)b::date[]", {"x": encode([])}).fetchone() == ([],)


def test_encoded_json_binds_as_jsonb_through_either_placeholder(
    conn: psycopg.Connection[Any],
) -> None:
    weights = Jsonb({"monthly": {"UTC": {"1": 3}}})
    encoded = encode(weights)

    row = conn.execute(
        "SELECT %(auto)s::jsonb -> 'monthly' -> 'UTC' ->> '1', %(binary)b::jsonb = %(raw)s::jsonb",
        {"auto": encoded, "binary": encoded, "raw": weights},
    ).fetchone()
    assert row == ("3", True)


def test_an_encoded_array_binds_through_an_automatic_placeholder_as_its_cast_reads_it(
    conn: psycopg.Connection[Any],
) -> None:
    # As the statements bind the scope's duty ids: %(duty_ids)s::text[].
    ids = ["d1", "d2"]

    row = conn.execute("SELECT %(ids)s::text[] @> ARRAY['d2']", {"ids": encode(ids)}).fetchone()

    assert row == (True,)


def test_every_page_of_a_run_binds_the_arrays_the_run_dumped_once() -> None:
    group = store.Group(
        frequency="monthly", timezone="UTC", lead_bucket=plan.lead_bucket(7), duties=1, max_lead=7
    )
    page = store.page_statement(
        Scope(),
        [(group, plan.schedule_for("monthly", "UTC", NOW))],
        store.Rules(),
        dry_run=False,
    )

    first = page.bind(None, "d1", 500, None, ())
    second = page.bind("d1", "d2", 500, None, ("d0",))

    arrays = [key for key, value in page.params.items() if isinstance(value, list) and value]
    assert "p_key" in arrays
    for key in arrays:
        assert isinstance(first[key], Encoded)
        assert first[key] is second[key]
    assert (first["after"], second["after"], second["excluded"]) == (None, "d1", ["d0"])
    # Weights are bound only where a page is weighed: once encoded, too.
    weighed = page.bind(None, "d1", 500, 10, ())
    assert isinstance(weighed["weights"], Encoded)
    assert weighed["weights"] is page.bind("d1", "d2", 500, 10, ())["weights"]

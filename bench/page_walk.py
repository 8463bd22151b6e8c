"""The head scan of every page, walking ``id`` or walking ``(organization_id, id)``.

Run: .venv/bin/python -m bench.page_walk [--duties 200000] [--by-organization] [--dsn DSN]

ADR 0005 leaves open whether pages should walk ``(organization_id, id)``, so
that on a sharded engine each page lives on one shard. This measures, apart
from the rest of a page, what that walk costs on one PostgreSQL: the bench's
duties (``bench.dispatch.data``, classic mix) are generated, a partial index
on ``(organization_id, id)`` matching ``duly_duty_dispatchable_approved`` is
added, and the rows of every page of 10,000 dispatchable duties are read
both ways under ``EXPLAIN (ANALYZE, BUFFERS)``, five times; it prints the
median execution time summed over the pages, and the buffers they touched.
``--by-organization`` first rewrites the table in ``(organization_id, id)``
order (the generator writes it in id order), to show what the heap's order
does to each walk. Without ``--dsn`` a throwaway embedded PostgreSQL is
started under /tmp and removed afterwards.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any, Final

import psycopg
from psycopg import sql

from bench.dispatch.data import generate
from bench.dispatch.mix import CLASSIC
from bench.dispatch.server import Conn, fresh_database, server

PAGE: Final = 10_000
REPEATS: Final = 5
DISPATCHABLE: Final = "status = 'active' AND form = 'recurring' AND review_status = 'approved'"
WALK_ID: Final = (
    f"SELECT d.* FROM duly_duty d WHERE {DISPATCHABLE}"
    " AND d.id > %(after)s AND d.id <= %(upto)s ORDER BY d.id"
)
WALK_KEY: Final = (
    f"SELECT d.* FROM duly_duty d WHERE {DISPATCHABLE}"
    " AND (d.organization_id, d.id) > (%(after_org)s, %(after)s)"
    " AND (d.organization_id, d.id) <= (%(upto_org)s, %(upto)s)"
    " ORDER BY d.organization_id, d.id"
)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duties", type=int, default=200_000)
    parser.add_argument("--by-organization", action="store_true")
    parser.add_argument("--dsn", help="a server to create the throwaway database on")
    args = parser.parse_args()
    with server(args.dsn) as (server_dsn, where):
        print(f"server: {where}")
        with (
            fresh_database(server_dsn, "walk") as dsn,
            psycopg.connect(dsn, autocommit=True) as conn,
        ):
            _measure(conn, args.duties, by_organization=args.by_organization)


def _measure(conn: Conn, duties: int, *, by_organization: bool) -> None:
    generate(conn, duties, max(1, duties // 20), CLASSIC)
    if by_organization:
        conn.execute(
            "CREATE TABLE reordered AS SELECT * FROM duly_duty ORDER BY organization_id, id"
        )
        conn.execute("ALTER TABLE duly_task DROP CONSTRAINT duly_task_duty")
        conn.execute("DROP TABLE duly_duty")
        conn.execute("ALTER TABLE reordered RENAME TO duly_duty")
        conn.execute(sql.SQL(f"CREATE INDEX ON duly_duty (id) WHERE {DISPATCHABLE}"))
    conn.execute(sql.SQL(f"CREATE INDEX ON duly_duty (organization_id, id) WHERE {DISPATCHABLE}"))
    conn.execute("VACUUM (ANALYZE) duly_duty")
    ids = [
        str(row[0])
        for row in conn.execute(
            sql.SQL(f"SELECT id FROM duly_duty WHERE {DISPATCHABLE} ORDER BY id")
        )
    ]
    keys = [
        (str(org), str(duty))
        for org, duty in conn.execute(
            sql.SQL(
                f"SELECT organization_id, id FROM duly_duty WHERE {DISPATCHABLE}"
                " ORDER BY organization_id, id"
            )
        )
    ]
    id_pages = [
        {"after": ids[at - 1] if at else "", "upto": ids[min(at + PAGE, len(ids)) - 1]}
        for at in range(0, len(ids), PAGE)
    ]
    key_pages = [
        {
            "after_org": keys[at - 1][0] if at else "",
            "after": keys[at - 1][1] if at else "",
            "upto_org": keys[min(at + PAGE, len(keys)) - 1][0],
            "upto": keys[min(at + PAGE, len(keys)) - 1][1],
        }
        for at in range(0, len(keys), PAGE)
    ]
    order = "(organization_id, id)" if by_organization else "id"
    print(f"N={duties:,}: {len(ids):,} dispatchable duties, {len(id_pages)} pages of {PAGE:,},")
    print(f"the heap in {order} order; every page's head scan, {REPEATS} times:")
    for label, query, pages in (
        ("id", WALK_ID, id_pages),
        ("(organization_id, id)", WALK_KEY, key_pages),
    ):
        times, buffers, rows, node = [], 0, 0, ""
        for _ in range(REPEATS):
            total, buffers, rows = 0.0, 0, 0
            for page in pages:
                plan = _explain(conn, query, page)
                total += float(plan["Execution Time"])
                top = plan["Plan"]
                buffers += int(top.get("Shared Hit Blocks", 0)) + int(
                    top.get("Shared Read Blocks", 0)
                )
                rows += int(top["Actual Rows"])
                node = f"{top['Node Type']} {top.get('Index Name', '')}".strip()
            times.append(total)
        print(
            f"  walking {label:<22} median {statistics.median(times):8.1f} ms"
            f" (min {min(times):.1f}, max {max(times):.1f}), {buffers:,} buffers,"
            f" {rows:,} rows; top node: {node}"
        )


def _explain(conn: Conn, query: str, params: dict[str, str]) -> dict[str, Any]:
    explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + sql.SQL(query)
    row = conn.execute(explain, params, prepare=False).fetchone()
    if row is None:
        raise RuntimeError("EXPLAIN returned no plan")
    plan: dict[str, Any] = row[0][0]
    return plan


if __name__ == "__main__":
    main()

"""tests/db needs a PostgreSQL: each test gets a fresh database from the root conftest.

Statements, migrations, roles, TLS and IAM, the ledger, the engine against
PostgreSQL's calendar, planner/database equivalence.
"""

NEEDS_DATABASE = True

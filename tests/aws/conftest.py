"""tests/aws needs a PostgreSQL: each test gets a fresh database from the root conftest.

The acceptance cases through lambda_handler, refusals, queries, the migration
step, fuzzing.
"""

NEEDS_DATABASE = True

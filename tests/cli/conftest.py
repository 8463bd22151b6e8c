"""tests/cli needs a PostgreSQL: each test gets a fresh database from the root conftest.

Every command and exit status.
"""

NEEDS_DATABASE = True

"""tests/template needs a PostgreSQL: each test gets a fresh database from the root conftest.

The translated CloudFormation, the built artifact (which answers events on a
real database), the make targets and the gates.
"""

NEEDS_DATABASE = True

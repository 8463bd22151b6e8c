"""tests/bench needs a PostgreSQL: each test gets a fresh database from the root conftest.

The benchmarks at a tiny N; their pure parts (judging, options, readings)
beside them.
"""

NEEDS_DATABASE = True

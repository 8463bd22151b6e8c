"""tests/run needs a PostgreSQL: each test gets a fresh database from the root conftest.

Whole runs: failing pages, locks, lost connections, processes released at one
instant, SIGKILL mid-run, outages, continuation, explain, each duty's account.
"""

NEEDS_DATABASE = True

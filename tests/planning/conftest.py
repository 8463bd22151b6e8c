"""tests/planning needs no database: make test-fast runs it with no server at all.

The planner: what a run owes each duty, and what a page statement binds. A test
here that asks for a database is refused at collection (tests/conftest.py).
"""

NEEDS_DATABASE = False

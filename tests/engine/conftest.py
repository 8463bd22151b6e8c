"""tests/engine needs no database: make test-fast runs it with no server at all.

The period engine: keys, bounds, due dates, zones and business-day rolls, with
hypothesis properties. A test here that asks for a database is refused at
collection (tests/folders.py).
"""

NEEDS_DATABASE = False

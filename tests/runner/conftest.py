"""tests/runner needs no database: make test-fast runs it with no server at all.

The run loop's rules without a server: settling a page, the scheduler, the
gapless mark. A test here that asks for a database is refused at collection
(tests/folders.py).
"""

NEEDS_DATABASE = False

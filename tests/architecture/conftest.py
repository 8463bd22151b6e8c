"""tests/architecture needs no database: make test-fast runs it with no server at all.

The package's shape: the layers' import rules, the README's change map, the
size of bench files, the test folders' own declarations. A test here that asks
for a database is refused at collection (tests/conftest.py).
"""

NEEDS_DATABASE = False

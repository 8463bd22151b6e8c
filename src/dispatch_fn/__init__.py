"""Duly dispatcher: recurring duties become one task per period, once, without a lock.

Its public surface is its layers, each a package with a face of its own
(README, "Where things live"): ``engine`` (periods), ``planning`` (what a run owes),
``db`` (PostgreSQL), ``run`` (one run), ``aws`` (what AWS calls) and ``cli``
(the command line). Importing this package loads none of them.
"""

__all__ = ["aws", "cli", "db", "engine", "planning", "run"]

"""The dispatcher against PostgreSQL's own floor, side by side in one run (issue 5).

Run: .venv/bin/python -m bench.dispatch [--duties N] [--backfill-duties M]
         [--chunk-size C] [--workers W] [--mix classic|compliance] [--json PATH]
         [--naive-sample S] [--database-url DSN] [--rds-proxy]

Without ``--database-url`` (or ``DATABASE_URL``) it starts an embedded
PostgreSQL in a temporary directory under /tmp and removes it afterwards; with
one, it creates a fresh database on that server and drops it afterwards.

What it measures, at one fixed clock (``data.CLOCK``):

a. the first scheduled run over N generated duties, in a child process (its
   own peak RSS, wall time, round trips);
b. the same run again, which must write nothing (rows written are read from
   ``pg_stat_user_tables`` before and after): first at once, as a retry would
   (b0), then after ``VACUUM (ANALYZE)`` of both tables, as the next day's run
   finds them once autovacuum has been by (b, the figure the bar judges);
c. a 13-month backfill of one organisation holding M duties, then again;
d. the floor: the very rows run (a) created, staged in a table, inserted into
   an identical empty ``duly_task`` by one ``INSERT … SELECT … ON CONFLICT DO
   NOTHING`` plus one set-based ``UPDATE`` of ``last_dispatched_period`` on an
   identical copy of ``duly_duty`` as it was before run (a); then both again,
   at once (d0) and after the same vacuum (d2);
e. the naive path: one ``INSERT`` round trip (and transaction) per task and
   one ``UPDATE`` per duty, on a sample of advanced duties spread over the id
   range, put back one by one into the full-size floor tables; the median
   statement times scaled to the first run's tasks and duties;
f. the first run's peak RSS again at N/10, in a fresh database of its own
   generated the same way (so the only thing that changes is N).

It prints a table with the ratios against the bar of issue 5 and writes the
same figures as JSON (default ``bench/results/dispatch-N.json``).

Before generating anything it checks the disk (``disk``): a probe on a few
thousand duties measures a duty's and a task's bytes, and a bench the data
directory's filesystem cannot hold is refused. ``python -m bench.dispatch.scale``
(``make bench-10m``) measures the first run and the no-op alone at a large N,
each as a chain of simulated Lambda invocations (``chain``), beside N/10.

Modules, by concept: ``cli`` (options, the entry point), ``mix`` and ``data``
(what the generated duties look like, and the SQL that writes them),
``server`` (servers, databases, settling and vacuuming), ``readings``
(``pg_stat_user_tables`` and ``/proc``), ``child`` (the dispatcher run in a
process of its own, shared with the tests), ``dispatcher`` (those runs as the
bench measures them), ``floor``, ``naive``, ``results``, ``judging`` and
``render``; ``benchmark`` runs them in order.
"""

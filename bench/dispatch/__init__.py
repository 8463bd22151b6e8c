"""The dispatcher against PostgreSQL's own floor, side by side in one run (issue 5).

Run: .venv/bin/python -m bench.dispatch [--duties N] [--backfill-duties M]
         [--chunk-size C] [--workers W] [--mix MIX[,MIX]|all]
         [--layout LAYOUT[,LAYOUT]|all] [--json PATH] [--naive-sample S]
         [--noop-rounds K] [--database-url DSN] [--rds-proxy]

Without ``--database-url`` (or ``DATABASE_URL``) it starts an embedded
PostgreSQL in a temporary directory under /tmp and removes it afterwards; with
one, it creates fresh databases on that server and drops them afterwards.

``--mix`` (classic, compliance) and ``--layout`` (plain, partitioned) each take
a comma-separated list or ``all``, the default: every (mix, layout) is measured
in one invocation against the same server, one after another, each in a fresh
database of its own. The first (classic, plain unless told otherwise: the mix
and layout of record) runs the full benchmark below; every other runs a
comparison pass: the same generated duties, then a0, a, b0, b and d, the phases
the ratios against the floor need, without the backfill, the naive path and
N/10 (``benchmark.run_comparison``).

What the full pass measures, at one fixed clock (``data.CLOCK``):

a0. the first run's request made dry, before it: every rule applied to every
   duty and nothing written, so its server CPU against the floor's splits the
   first run's into working the rows out and writing them
   (``results.WorkSplit``);
a. the first scheduled run over N generated duties, in a child process (its
   own peak RSS, wall time, round trips), recorded in the run ledger as the
   deployed function records every run (so a re-run of its clock knows from
   its first page that its rows exist);
b. the same run again, which must write nothing (rows written are read from
   ``pg_stat_user_tables`` before and after): first at once, as a retry would
   (b0), then after ``VACUUM (ANALYZE)`` of both tables, as the next day's run
   finds them once autovacuum has been by (b, the figure the bar judges);
c. a 13-month backfill of one organisation holding M duties, then again;
d. the floor: the very rows run (a) created, staged in a table, inserted into
   an identical empty ``duly_task`` by one ``INSERT … SELECT … ON CONFLICT DO
   NOTHING`` plus one set-based ``UPDATE`` of ``last_dispatched_period`` on an
   identical copy of ``duly_duty`` as it was before run (a); then both again,
   at once (d0) and after the same vacuum (d2); then K - 1 more no-op rounds
   (``--noop-rounds``, default 3), each b then d2 again on the tables as they
   are: the no-op lines judge the median of the K rounds' ratios, so one
   slow spell of this shared machine does not decide them;
e. the naive path: one ``INSERT`` round trip (and transaction) per task and
   one ``UPDATE`` per duty, on a sample of advanced duties spread over the id
   range, put back one by one into the full-size floor tables; the median
   statement times scaled to the first run's tasks and duties;
f. the first run's peak RSS again at N/10, in a fresh database of its own
   generated the same way (so the only thing that changes is N).

It prints a table with the ratios against the bar of issue 5 and writes the
same figures as JSON (default ``bench/results/dispatch-N.json``). With more
than one (mix, layout) it then prints one more table, side by side, a row per
pass (first run and no-op against the floor's, wall time and the whole
server's CPU; round trips, peak RSS, tasks created), and writes every pass's
figures to ``bench/results/dispatch-N-side-by-side.json``. The exit status is
1 if a judged line of any pass fails (a comparison pass is judged by the
lines it has the figures for).

Before generating anything it checks the disk for every pass (``disk``): a
probe on a few thousand duties of each mix measures a duty's and a task's
bytes, and a bench the data directory's filesystem cannot hold is refused.
``python -m bench.dispatch.scale`` (``make bench-10m``) measures the first run
and the no-op alone at a large N, each as a chain of simulated Lambda
invocations (``chain``), beside N/10, for one mix on the plain layout.

Modules, by concept: ``cli`` (options, the entry point), ``mix`` and ``data``
(what the generated duties look like, and the SQL that writes them),
``server`` (servers, databases, settling and vacuuming), ``readings``
(``pg_stat_user_tables`` and ``/proc``), ``child`` (the dispatcher run in a
process of its own, shared with the tests; its connections, which count
round trips, in ``counting``, and what its run stops by in ``budgets``),
``dispatcher`` (those runs as the bench measures them), ``floor``,
``naive``, ``results``, ``judging`` and ``render``; ``benchmark`` runs them
in order, pass by pass.
"""

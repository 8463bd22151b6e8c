-- ledger.latest_completed_clock: whether a run's pages probe for their rows first
-- (page_plan.probes_from_the_start: a re-run). The
-- latest clock of a completed, scheduled, unscoped, non-dry run; a chain's
-- linked last link counts (it completed what its predecessors left). Served
-- by the partial index duly_dispatch_run_completed_clock. A run whose clock
-- was ahead of the wall clock when it started (a manual run at a future
-- clock) never counts: it would switch catch-up off until real time passed it.
-- Five minutes of slack: a clock read from Lambda's own time may run a little
-- ahead of the database's, and the runs this excludes are days ahead.
SELECT clock FROM duly_dispatch_run
WHERE status = 'completed' AND mode = 'scheduled' AND NOT dry_run
  AND organization_id IS NULL AND duty_ids IS NULL
  AND (resume_after IS NULL OR continues_run IS NOT NULL)
  AND clock <= started_at + interval '5 minutes'
ORDER BY clock DESC
LIMIT 1

-- ledger.earliest_clock: the earliest clock of an unscoped, non-dry scheduled
-- run whose clock was not later than the wall clock when it started, among
-- the runs that kept accounts (they record their rules: migration 0012). A
-- duty no run has kept an account for, and that no edit placed, existed
-- since then (docs/contract.md#account); one that existed before owes what
-- the first run that keeps accounts owes it.
SELECT min(r.clock) AS clock
FROM duly_dispatch_run r
WHERE r.mode = 'scheduled' AND NOT r.dry_run
  AND r.organization_id IS NULL AND r.duty_ids IS NULL
  AND r.clock <= r.started_at
  AND r.rules IS NOT NULL

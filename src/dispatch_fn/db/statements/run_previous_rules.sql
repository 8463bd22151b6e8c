-- ledger.previous_rules: the rules of the latest completed scheduled,
-- unscoped, non-dry run (migration 0012); null before any run recorded them.
-- A manual run at a clock later than the wall clock when it started is never
-- the previous run, as duly_latest_scheduled_clock() never counts it.
SELECT r.rules
FROM duly_dispatch_run r
WHERE r.status = 'completed' AND r.mode = 'scheduled' AND NOT r.dry_run
  AND r.organization_id IS NULL AND r.duty_ids IS NULL
  AND (r.resume_after IS NULL OR r.continues_run IS NOT NULL)
  AND r.clock <= r.started_at
ORDER BY r.clock DESC, r.id DESC
LIMIT 1

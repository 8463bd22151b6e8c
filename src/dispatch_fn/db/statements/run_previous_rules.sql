-- ledger.previous_rules: the rules of the latest completed scheduled,
-- unscoped, non-dry run that set no duty aside (migration 0012); null before
-- any run recorded them. A run that set a duty aside did not judge it: were
-- it the first under new rules, the next would not judge that duty afresh,
-- so the runs after it judge every duty afresh until one sets none aside.
-- A manual run at a clock later than the wall clock when it started is never
-- the previous run, as duly_latest_scheduled_clock() never counts it.
SELECT r.rules
FROM duly_dispatch_run r
WHERE r.status = 'completed' AND r.mode = 'scheduled' AND NOT r.dry_run
  AND r.organization_id IS NULL AND r.duty_ids IS NULL
  AND (r.resume_after IS NULL OR r.continues_run IS NOT NULL)
  AND r.clock <= r.started_at
  AND NOT EXISTS (SELECT FROM duly_dispatch_set_aside s WHERE s.run_id = r.id)
ORDER BY r.clock DESC, r.id DESC
LIMIT 1

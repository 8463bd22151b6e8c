-- ledger.previous_rules: the rules of the latest completed scheduled,
-- unscoped, non-dry run (migration 0012); null before any run recorded them.
SELECT r.rules
FROM duly_dispatch_run r
WHERE r.status = 'completed' AND r.mode = 'scheduled' AND NOT r.dry_run
  AND r.organization_id IS NULL AND r.duty_ids IS NULL
  AND (r.resume_after IS NULL OR r.continues_run IS NOT NULL)
ORDER BY r.clock DESC, r.id DESC
LIMIT 1

-- ledger.record_engine_days: the clocks of the non-dry scheduled runs that
-- recorded no local_days (runs before migration 0020) and that
-- duly_latest_scheduled_clock can still return for some duty: the latest
-- unscoped one and those after it (a scoped run before it never is a duty's
-- latest). A handful at most, found along the ledger's clock index.
SELECT DISTINCT r.clock
FROM duly_dispatch_run r
WHERE r.mode = 'scheduled' AND NOT r.dry_run AND r.clock <= r.started_at
  AND r.local_days IS NULL
  AND r.clock >= coalesce(
      (SELECT u.clock
       FROM duly_dispatch_run u
       WHERE u.mode = 'scheduled' AND NOT u.dry_run AND u.clock <= u.started_at
         AND u.organization_id IS NULL AND u.duty_ids IS NULL
       ORDER BY u.clock DESC
       LIMIT 1),
      '-infinity'::timestamptz)
ORDER BY r.clock

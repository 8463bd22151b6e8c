-- ledger.record_engine_days: the clocks of the non-dry scheduled runs that
-- recorded no local_days (runs before migration 0020) and that
-- duly_latest_scheduled_clock can still return for some duty: a duty's
-- latest clock is the latest of one scope (unscoped, its organisation's, or
-- a list naming it), never before the latest unscoped one. One clock a scope
-- at most, whatever the ledger holds.
WITH latest AS (
    SELECT DISTINCT ON (r.organization_id, r.duty_ids) r.clock
    FROM duly_dispatch_run r
    WHERE r.mode = 'scheduled' AND NOT r.dry_run AND r.clock <= r.started_at
    ORDER BY r.organization_id, r.duty_ids, r.clock DESC
)
SELECT DISTINCT l.clock
FROM latest l
WHERE l.clock >= coalesce(
          (SELECT max(u.clock) FROM duly_dispatch_run u
           WHERE u.mode = 'scheduled' AND NOT u.dry_run AND u.clock <= u.started_at
             AND u.organization_id IS NULL AND u.duty_ids IS NULL),
          '-infinity'::timestamptz)
  AND EXISTS (SELECT FROM duly_dispatch_run m
              WHERE m.clock = l.clock AND m.mode = 'scheduled' AND NOT m.dry_run
                AND m.local_days IS NULL)
ORDER BY l.clock

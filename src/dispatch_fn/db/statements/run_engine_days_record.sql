-- ledger.record_engine_days: the engine's local days of %(clock)s that the
-- server's tz data reads otherwise, on the runs at that clock that recorded
-- none (migration 0020's local_days, as run_start.sql records them).
UPDATE duly_dispatch_run r
SET local_days = duly_engine_days_apart(%(clock)s, %(zones)s::text[], %(days)s::date[])
WHERE r.clock = %(clock)s AND r.mode = 'scheduled' AND NOT r.dry_run AND r.local_days IS NULL

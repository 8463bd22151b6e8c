-- ledger.start: a run begins. One autocommit statement before the run's
-- first page; its id is the report's run_id. local_days: of a scheduled
-- run's clock's local day in each zone as the engine judged it (%(zones)s,
-- %(days)s; null for other runs), those the server's tz data reads otherwise
-- (migration 0020: the trigger places edits on the engine's days).
-- started_at: the server's time, or the wall clock the run judged its own
-- clock by (%(started_at)s, the function's time) where that is later, so
-- that a run whose clock was read from a function's time a moment ahead of
-- the server's is "a clock not later than the wall clock when it started"
-- to the ledger and the trigger, as it is to the run that keeps accounts.
INSERT INTO duly_dispatch_run (mode, clock, window_from, window_to, organization_id, duty_ids,
                               dry_run, request_id, continues_run, continuation, resume_after,
                               rules, started_at, local_days)
VALUES (%(mode)s, %(clock)s, %(window_from)s, %(window_to)s, %(organization_id)s,
        %(duty_ids)s, %(dry_run)s, %(request_id)s, %(continues_run)s, %(continuation)s,
        %(resume_after)s, %(rules)s, greatest(now(), %(started_at)s::timestamptz),
        CASE WHEN %(zones)s::text[] IS NOT NULL
             THEN duly_engine_days_apart(%(clock)s, %(zones)s::text[], %(days)s::date[]) END)
RETURNING id

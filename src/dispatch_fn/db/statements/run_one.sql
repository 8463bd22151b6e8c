-- ledger.one: what a person reads of one run, for `python -m dispatch_fn runs show ID`,
-- with whether a run still 'running' past the function's timeout was abandoned.
SELECT id, mode, clock, window_from, window_to, organization_id, duty_ids, dry_run, request_id,
       continues_run, continuation, resume_after, status, started_at, finished_at, error, report,
       status = 'running' AND started_at < clock_timestamp() - %(timeout)s::interval AS abandoned
FROM duly_dispatch_run
WHERE id = %(id)s

-- ledger.finish: how a run ended (completed, incomplete, failed) and its final
-- report. One autocommit statement after the run's last page. Never before
-- it started: started_at may be the function's clock, a moment ahead of the
-- server's (run_start.sql).
UPDATE duly_dispatch_run
SET status = %(status)s, finished_at = greatest(clock_timestamp(), started_at),
    report = %(report)s, error = %(error)s
WHERE id = %(id)s

-- ledger.finish: how a run ended (completed, incomplete, failed) and its final
-- report. One autocommit statement after the run's last page.
UPDATE duly_dispatch_run
SET status = %(status)s, finished_at = clock_timestamp(), report = %(report)s, error = %(error)s
WHERE id = %(id)s

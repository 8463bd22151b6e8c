-- ledger.latest_scheduled_clock: whether a scheduled run may pass over the
-- duties whose next owed day it has not reached (docs/contract.md#account).
-- The latest clock of a non-dry scheduled run, scoped or not, whose clock was
-- not later than the wall clock when it started: a run that may have written
-- the next days it would read by. A run at an earlier clock reads every duty
-- in its scope, as those days were judged for a later one. Read backwards
-- along the ledger's clock index, it stops at the first such run.
SELECT clock FROM duly_dispatch_run
WHERE mode = 'scheduled' AND NOT dry_run AND clock <= started_at
ORDER BY clock DESC
LIMIT 1

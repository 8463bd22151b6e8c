-- A fault ends only at a run that read its duty (docs/contract.md#metrics),
-- reproduced in tests/db/test_new_faults.py first.
--
-- A scheduled run reads only the duties whose next owed day has come
-- (migration 0014), and the fault account removed the row of every duty in
-- the run's scope that it did not fault, read or not. A duty the server
-- refused in a run that reads every duty (a backfill, a manual run at a past
-- clock, the first under new rules), with no day owed before its next, lost
-- its row at the next scheduled run, which tested nothing; refused again
-- when its day came, its fault counted as new (NewFaults 1, the alarm
-- raised twice for one broken duty).
--
-- The row now keeps the duty's dispatch_next_at as the run that began the
-- fault read it. A run that faults a duty never moves its account, so while
-- the duty's instant is still that one, after the run's clock, and the run
-- did not read it for a judgement afresh, no run has read it since; a run
-- that read it moved it, or an edit reset it (migration 0014's trigger).
-- Rows from before this migration have none: they end as before.
--
-- One nullable column: a catalog change under a lock held for milliseconds
-- (waiting at most lock_timeout to get it), no row rewritten.
SET lock_timeout = '5s';

ALTER TABLE duly_dispatch_fault ADD COLUMN IF NOT EXISTS duty_next_at timestamptz;

-- A fault the server's refusal began ends only once a run tries the duty
-- again (docs/contract.md#metrics), reproduced in tests/db/test_new_faults.py
-- first.
--
-- The fault account removed the row of every duty in a run's scope that the
-- run did not fault. A scheduled run reads only the duties whose next owed
-- day has come (migration 0014), and a run that reads a duty owing nothing
-- tries none of its rows: a duty whose task the server refused (a rule added
-- to duly_task later) in a backfill, tried by no run until its next period,
-- lost its row at the next day's run, and when its period's run found it
-- refused still, its fault counted as new (NewFaults 1, the alarm raised
-- twice for one broken duty).
--
-- The row now keeps, for such a fault, the duty's account as the refusing
-- run read it: its edit version, its day and its next instant. The refused
-- statement moved none of them; a run that tries the duty's rows and writes
-- them moves its account, and an edit bumps the version. While all three
-- stand, no run has tried the duty since, and the row stays. A fault the
-- planner found (the row's own values: a zone, a form) is judged at every
-- run that reads the duty, and a duty it faults keeps its account, so every
-- run reads it: its row keeps none, and ends as before. Rows from before
-- this migration keep none either.
--
-- Three nullable columns: a catalog change under a lock held for
-- milliseconds (waiting at most lock_timeout to get it), no row rewritten.
SET lock_timeout = '5s';

ALTER TABLE duly_dispatch_fault
    ADD COLUMN IF NOT EXISTS duty_version bigint,
    ADD COLUMN IF NOT EXISTS duty_through date,
    ADD COLUMN IF NOT EXISTS duty_next_at timestamptz;

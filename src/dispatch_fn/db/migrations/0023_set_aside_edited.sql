-- A duty edited while a backfill is on its pages, into values the backfill
-- did not plan for (a group, a lead wider than its group's schedule reaches,
-- a due rule it did not judge), is set aside as 'edited'
-- (docs/contract.md#set-aside), reproduced in
-- tests/run/test_edits_during_a_run.py first.
--
-- A run leaves such a duty's account as the edit left it and the next run
-- judges it, as if the edit came after the run; but a backfill's periods are
-- owed by no scheduled run, so a duty a backfill did not plan for lost its
-- window's periods with nothing said. The ledger takes the reason.
--
-- The check is replaced on this small table (one row per duty a run set
-- aside): its rows are scanned once under ACCESS EXCLUSIVE, waiting at most
-- lock_timeout for the lock.
SET lock_timeout = '5s';

ALTER TABLE duly_dispatch_set_aside DROP CONSTRAINT IF EXISTS duly_dispatch_set_aside_reason;

ALTER TABLE duly_dispatch_set_aside
    ADD CONSTRAINT duly_dispatch_set_aside_reason
    CHECK (reason IN ('locked', 'timed_out', 'edited'));

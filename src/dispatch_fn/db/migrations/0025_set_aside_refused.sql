-- A duty whose row the server refused while the run judged it afresh stays
-- owed that judgement (docs/contract.md#account), reproduced in
-- tests/run/test_duty_accounts.py first.
--
-- A run under new rules judges every account it reads afresh; the runs after
-- it, their rules the same, read only the duties whose next owed day has
-- come. A duty whose task the server refused in that first run (a rule added
-- to duly_task later, a foreign key its owner breaks) is a fault, and its
-- account stands: mended without an edit of its row, it was never judged
-- afresh, and a monthly duty whose current task someone deleted never had it
-- again. The run now writes such a duty down with those it set aside, as
-- 'refused', its judgement owed; the next run reads it whatever its next owed
-- day and judges it afresh, as migration 0022 does for a locked one. Only
-- those the run judged afresh: any other refused duty's account already says
-- what it owes, and the fault account (migration 0013) keeps the fault.
--
-- The check is replaced on this small table (one row per duty a run set
-- aside): its rows are scanned once under ACCESS EXCLUSIVE, waiting at most
-- lock_timeout for the lock.
SET lock_timeout = '5s';

ALTER TABLE duly_dispatch_set_aside DROP CONSTRAINT IF EXISTS duly_dispatch_set_aside_reason;

ALTER TABLE duly_dispatch_set_aside
    ADD CONSTRAINT duly_dispatch_set_aside_reason
    CHECK (reason IN ('locked', 'timed_out', 'edited', 'refused'));

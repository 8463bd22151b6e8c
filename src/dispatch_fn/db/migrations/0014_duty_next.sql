-- duly:no-transaction
-- A run reads what is owed (docs/contract.md#account, docs/adr/0012): each
-- duty's account gains the local day on which it next owes something, and a
-- scheduled run reads, through an index, only the duties whose day has come.
--
--   dispatch_next   the first local day on which a run could owe the duty
--                   anything or move its account: written with the account,
--                   in the statement that writes the duty's tasks. A day no
--                   later than the first day any period not yet owed becomes
--                   owed, so a duty the index passes over owes nothing.
--                   '0001-01-01' (the default, and what the trigger writes on
--                   any edit that marks the account, migration 0015): every
--                   run reads it.
--                   '9999-12-31': nothing more until an edit, its effective
--                   window being over. Plain dates every driver reads.
--
-- Each statement commits alone: adding a NOT NULL column with a constant
-- default writes the catalog only (no row is rewritten; ACCESS EXCLUSIVE for
-- milliseconds, waiting at most lock_timeout to get it), and the indexes are
-- built and dropped CONCURRENTLY, so writers go on throughout. Every step is
-- re-runnable.
SET lock_timeout = '5s';

ALTER TABLE duly_duty
    ADD COLUMN IF NOT EXISTS dispatch_next date NOT NULL DEFAULT date '0001-01-01';

-- The pages walk the dispatchable duties in id order, and a scheduled run
-- takes those whose day has come: the day is a key column, so the index
-- itself tests it and the heap is read only for the duties owed. It serves
-- every walk migration 0006's index did (id order, the same predicate), which
-- it replaces: with the day indexed an account write is no HOT update, and
-- each index the row has costs that write an entry.
CREATE INDEX CONCURRENTLY IF NOT EXISTS duly_duty_dispatch_next
    ON duly_duty (id, dispatch_next) INCLUDE (organization_id)
    WHERE status = 'active' AND form = 'recurring' AND review_status = 'approved';

DROP INDEX CONCURRENTLY IF EXISTS duly_duty_dispatchable_approved;

-- A scheduled run still counts the duties it does not dispatch, by reason
-- (docs/contract.md#selection), and reports those whose form it does not know
-- as faults: from this index alone (an index-only scan), not from their rows.
CREATE INDEX CONCURRENTLY IF NOT EXISTS duly_duty_left_out
    ON duly_duty (form, status, review_status) INCLUDE (organization_id, id)
    WHERE status IS DISTINCT FROM 'active' OR form IS DISTINCT FROM 'recurring'
       OR review_status IS DISTINCT FROM 'approved';

DO $$
BEGIN
    EXECUTE format('GRANT UPDATE (dispatch_next) ON duly_duty TO %I', duly_dispatcher_role());
END
$$;

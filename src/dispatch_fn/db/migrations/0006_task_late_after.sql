-- duly:no-transaction
-- Each statement commits alone, so a table of tens of millions of tasks is
-- never locked for the length of the whole migration:
--   1. existing tasks get late_after = due_date (they were stamped with no
--      grace), 50,000 ids per committed batch: each batch holds row locks on
--      its rows only, and autovacuum can reclaim the old versions as it goes;
--   2. VALIDATE scans once under a lock that lets reads and inserts continue;
--   3. SET NOT NULL then finds the validated check and skips its own scan
--      (PostgreSQL 12+), holding ACCESS EXCLUSIVE only for a catalog update;
--   4. the indexes are built and dropped CONCURRENTLY.
-- Every step is re-runnable, so a migration killed half way is simply re-run.

DO $$
DECLARE
    next_id bigint := (SELECT min(id) FROM duly_task WHERE late_after IS NULL);
    last_id bigint := (SELECT max(id) FROM duly_task);
BEGIN
    -- Walk the primary key in ranges, so each batch reads only its own rows.
    WHILE next_id <= last_id LOOP
        UPDATE duly_task SET late_after = due_date
        WHERE id >= next_id AND id < next_id + 50000 AND late_after IS NULL;
        next_id := next_id + 50000;
        COMMIT;
    END LOOP;
END
$$;

ALTER TABLE duly_task VALIDATE CONSTRAINT duly_task_late_after_set;

ALTER TABLE duly_task ALTER COLUMN late_after SET NOT NULL;

ALTER TABLE duly_task DROP CONSTRAINT duly_task_late_after_set;

-- "What is late today" per organisation: open tasks whose grace has run out.
CREATE INDEX CONCURRENTLY IF NOT EXISTS duly_task_open_late
    ON duly_task (organization_id, late_after)
    WHERE status = 'open';

-- The review gate joins the dispatchable predicate (plan.is_dispatchable), so
-- the partial index the pages walk holds exactly the approved duties.
CREATE INDEX CONCURRENTLY IF NOT EXISTS duly_duty_dispatchable_approved
    ON duly_duty (id)
    WHERE status = 'active' AND form = 'recurring' AND review_status = 'approved';

DROP INDEX CONCURRENTLY IF EXISTS duly_duty_dispatchable;

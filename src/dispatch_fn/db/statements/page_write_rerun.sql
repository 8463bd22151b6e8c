-- page_write.sql for a page whose owed tasks mostly exist already (a
-- re-run: the same clock dispatched again, or one whose pages an earlier link
-- of its chain wrote): the same page, the same one-row result
-- (store.PageResult), the same rows written. page_plan.probes_from_the_start
-- and page_plan.rows_mostly_present decide which of the two a page runs.
--
-- It differs in one place: before the INSERT, each owed row is looked up in
-- duly_task_dispatch_identity and only those absent go on to be inserted, so
-- a page that owes nothing new builds no tuple and makes no speculative
-- insertion (docs/performance-history.md#server-cpu has the figures). Idempotency
-- stays the constraint's: ON CONFLICT DO NOTHING still refuses what a
-- concurrent run inserted since the probe looked. On a page whose rows are
-- all new the probe finds nothing and only costs its lookups, so running this
-- statement where page_write.sql was due costs time, never a row. (A task
-- deleted by another transaction while the page runs, which no run does,
-- is still seen by the probe and is re-created by the next run rather than
-- this one.)
--
-- Everything else (placeholders, planning, page_owed.sql's CTEs, included
-- here as there; tests/db/test_statements.py holds the rest together) is
-- page_write.sql's, and so are the comments that explain it there.
-- duly:include page_owed
inserted AS (
    INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject, source,
                           period_key, due_date, visible_from, late_after)
    SELECT o.organization_id, o.duty_id, o.owner_id, o.business_unit_id, o.subject, o.source,
           o.period_key, o.due_date, o.visible_from, o.late_after
    FROM owed o
    WHERE o.owes
    -- The probe: a row the unique index already holds is dropped here, for
    -- the price of one index lookup, instead of being built as a heap tuple
    -- and refused by a speculative insertion. It only filters: a row another
    -- run inserts after this statement's snapshot is still refused by the
    -- constraint below, exactly as page_write.sql's would be.
      AND NOT EXISTS (
        SELECT 1 FROM duly_task t
        WHERE (t.organization_id, t.duty_id, t.owner_id, t.period_key)
            = (o.organization_id, o.duty_id, o.owner_id, o.period_key))
    ORDER BY duty_id COLLATE "C", period_key COLLATE "C"
    ON CONFLICT ON CONSTRAINT duly_task_dispatch_identity DO NOTHING
    RETURNING organization_id, duty_id, period_key
),
-- duly:include page_advance
-- duly:include page_result
-- The page in one row (store.PageResult): its counts, the tasks inserted,
-- the duties whose latest period moved, and the accounts kept.
SELECT c.*,
       (SELECT count(*) FROM inserted) AS created,
       (SELECT count(*) FILTER (WHERE advanced) FROM advanced) AS advanced,
       (SELECT count(*) FILTER (WHERE kept) FROM advanced) AS kept
FROM page_counts c

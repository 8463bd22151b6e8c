-- The owed tasks of one keyset page of dispatchable duties: insert them,
-- advance last_dispatched_period, and report the page in one row
-- (store.PageResult).
--
-- Rows go in sorted by the unique key, so two runs inserting overlapping sets
-- wait on each other in one order instead of deadlocking. The never-regress
-- comparison sits in the UPDATE's WHERE, which PostgreSQL re-checks against the
-- newest row version if a concurrent run moved it first.
--
-- Periods compare by when they start (duly_period_first_day, migration 0007),
-- so a duty whose frequency changed moves on from its old key: '2026-12'
-- follows '2026-W46', which sorts after it as text. Keys starting on the same
-- day (a week and a fortnight) fall back to their spelling in "C" collation;
-- a stored key nobody can read is replaced. One run's keys for one duty share
-- a frequency, where "C" order (fixed-width ASCII) is already chronological,
-- so the latest of them is their max.
--
-- Run from psql with each named placeholder replaced by a value, or
-- through psycopg as store.dispatch_page does: never prepared, so that every
-- page is planned with its own values and each null test on them folds away.
--
-- The run's schedules travel as arrays, read through scalar subqueries so the
-- planner sizes them as small sets of unknown length and hashes them instead
-- of sorting the whole page for a merge join (docs/adr/0002). The page's
-- bounds (%(after)s, %(upto)s; null: open) and the run's scope are bound
-- parameters too.
--
-- The CTEs from cadence to owed, and keeping, are page_owed.sql's, included
-- here as they are in page_write_rerun.sql (the variant for pages whose
-- tasks mostly exist) and page_dry_run.sql; page_taken_ids.sql shares their
-- head and page.
-- duly:include page_owed
inserted AS (
    INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject, source,
                           period_key, due_date, visible_from, late_after)
    SELECT o.organization_id, o.duty_id, o.owner_id, o.business_unit_id, o.subject, o.source,
           o.period_key, o.due_date, o.visible_from, o.late_after
    FROM owed o
    WHERE NOT o.lapsed
    ORDER BY duty_id COLLATE "C", period_key COLLATE "C"
    ON CONFLICT ON CONSTRAINT duly_task_dispatch_identity DO NOTHING
    RETURNING organization_id, duty_id, period_key
),
advanced AS (
    -- One UPDATE per duty: last_dispatched_period and the account together
    -- (a row updated twice in one statement keeps one of the two). The
    -- organisation is part of the duty's key: on a layout partitioned by it
    -- (docs/adr/0005) the only index on id is (organization_id, id).
    -- The account is written only if no edit committed since the page read
    -- the row: dispatch_version is re-checked against the newest row version
    -- when a concurrent edit moved it first, so the run's bookkeeping never
    -- overwrites the edit's marks (the next run reads the edit).
    UPDATE duly_duty d
    SET last_dispatched_period = CASE WHEN (u.latest IS NOT NULL
                 AND (d.last_dispatched_period IS NULL
                      OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
                          d.last_dispatched_period COLLATE "C")
                       < (duly_period_first_day(u.latest), u.latest)))
                                      THEN u.latest ELSE d.last_dispatched_period END,
        dispatch_through = CASE WHEN u.keep AND u.version = d.dispatch_version
                                THEN greatest(d.dispatch_through, u.today)
                                ELSE d.dispatch_through END,
        dispatch_paused_on = CASE WHEN u.keep AND u.version = d.dispatch_version THEN NULL
                                  ELSE d.dispatch_paused_on END,
        dispatch_changed_on = CASE WHEN u.keep AND u.version = d.dispatch_version THEN NULL
                                   ELSE d.dispatch_changed_on END
    FROM (SELECT coalesce(k.organization_id, i.organization_id) AS organization_id,
                 coalesce(k.id, i.duty_id) AS id, k.today, k.version,
                 coalesce(k.keep, false) AS keep, i.latest
          FROM (SELECT * FROM keeping WHERE keep) k
          FULL JOIN (SELECT organization_id, duty_id, max(period_key COLLATE "C") AS latest
                     FROM inserted GROUP BY organization_id, duty_id) i
            ON (i.organization_id, i.duty_id) = (k.organization_id, k.id)) u
    -- The key compared as one-element arrays, not as equalities: nothing to
    -- hash, so the planner cannot read every duty partition whole for a
    -- page's few duties, and each is found by its organisation and id
    -- through the key, estimated as an equality would be.
    WHERE d.organization_id = ANY(ARRAY[u.organization_id]) AND d.id = ANY(ARRAY[u.id])
      AND ((u.latest IS NOT NULL
                 AND (d.last_dispatched_period IS NULL
                      OR (coalesce(duly_period_first_day(d.last_dispatched_period), '-infinity'::date),
                          d.last_dispatched_period COLLATE "C")
                       < (duly_period_first_day(u.latest), u.latest)))
           OR (u.keep AND u.version = d.dispatch_version))
    -- Read after the update: the key just inserted is the duty's latest
    -- exactly when this statement moved it there.
    RETURNING d.id, coalesce(d.last_dispatched_period = u.latest, false) AS advanced,
              u.keep AND u.version = d.dispatch_version AS kept
)
-- The page in one row, its columns named as store.PageResult's fields.
--
-- Each CTE is scanned once. max(id) is taken in the database's own collation,
-- the one the page's ORDER BY used, so it is the next cursor. nothing_due (in
-- its window, yet owed nothing) is counted by difference: an anti-join between
-- two CTEs is planned blind, as a nested loop. Its DISTINCT sorts the page's
-- owed rows; in "C" that is a byte comparison, where a linguistic default
-- collation (such as en_US.UTF-8) would call strcoll for each, for the same
-- count. cut: the row budget ended the page before its size did (the page
-- CTE), so the range goes on after upto however few duties the page held.
SELECT d.upto, d.page_rows AS rows, d.duties, d.outside_window,
       d.in_window - o.owing AS nothing_due, o.owed,
       (SELECT count(*) FROM inserted) AS created,
       (SELECT count(*) FILTER (WHERE advanced) FROM advanced) AS advanced,
       (SELECT count(*) FILTER (WHERE lags) FROM keeping) AS lapsed, d.changed, (SELECT count(*) FILTER (WHERE kept) FROM advanced) AS kept,
       d.cut
FROM (SELECT max(id) AS upto,
             count(*) AS page_rows,
             coalesce(bool_or(cut_after), false) AS cut,
             count(schedule_no) AS duties,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND NOT in_window) AS outside_window,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND in_window) AS in_window,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND changed_while_owed
                              AND today IS NOT NULL) AS changed
      FROM placed) d,
     (SELECT count(*) FILTER (WHERE NOT lapsed) AS owed,
             count(DISTINCT duty_id COLLATE "C") FILTER (WHERE NOT lapsed) AS owing
      FROM owed) o

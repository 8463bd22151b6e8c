-- The counts of one page that every page statement reports, as a CTE:
-- page_write.sql, page_write_rerun.sql and page_dry_run.sql include it where
-- they say `-- duly:include page_result`, after their own CTEs, and select
-- page.* with what each adds (created, advanced, kept). Its columns are named
-- as store.PageResult's fields, which store reads by name: a counter of the
-- page's duties or owed rows is a line here and a field there.
--
-- Each CTE is scanned once. max(id) is taken in the database's own collation,
-- the one the page's ORDER BY used, so it is the next cursor. nothing_due (in
-- its window, yet owed nothing) is counted by difference: an anti-join between
-- two CTEs is planned blind, as a nested loop. Its DISTINCT sorts the page's
-- owed rows; in "C" that is a byte comparison, where a linguistic default
-- collation (such as en_US.UTF-8) would call strcoll for each, for the same
-- count. cut: the row budget ended the page before its size did (the page
-- CTE), so the range goes on after upto however few duties the page held.
-- lapsed: duties with a period past the horizon (keeping's lags);
-- lapse_probes: the accounts of those whose older periods may have lapsed
-- unseen (placed's lapse_probe), which the run judges itself; unplaced: the
-- (organization_id, id) of the page's duties it did not judge (placed's null
-- schedule_no: a fault counted before the pages, or an edit since the run
-- planned, which the run tells apart).
page_counts AS (
    SELECT d.upto, d.page_rows AS rows, d.duties, d.outside_window,
           d.in_window - o.owing AS nothing_due, o.owed,
           k.lapsed, k.lapse_probes, d.changed, d.cut, d.unplaced
    FROM (SELECT max(id) AS upto,
                 count(*) AS page_rows,
                 coalesce(bool_or(cut_after), false) AS cut,
                 count(schedule_no) AS duties,
                 count(*) FILTER (WHERE schedule_no IS NOT NULL AND NOT in_window) AS outside_window,
                 count(*) FILTER (WHERE schedule_no IS NOT NULL AND in_window) AS in_window,
                 count(*) FILTER (WHERE schedule_no IS NOT NULL AND changed_while_owed
                                  -- judged: in its window (plan.judge_duty)
                                  AND in_window AND today IS NOT NULL) AS changed,
                 coalesce(array_agg(ARRAY[organization_id, id]) FILTER (WHERE schedule_no IS NULL),
                          '{}') AS unplaced
          FROM placed) d,
         (SELECT count(*) FILTER (WHERE owes) AS owed,
                 -- A duty is its key: on a layout keyed by (organization_id,
                 -- id) two organisations' duties may share the id (ADR 0005).
                 -- One text, not a row: a sort compares rows column by
                 -- column, at 5 times the cost of one text in "C".
                 count(DISTINCT duly_duty_key(organization_id, duty_id) COLLATE "C")
                     FILTER (WHERE owes) AS owing
          FROM owed) o,
         (SELECT count(*) FILTER (WHERE lags) AS lapsed,
                 coalesce(array_agg(lapse_probe) FILTER (WHERE lapse_probe IS NOT NULL
                                                          AND NOT lags),
                          '{}') AS lapse_probes
          FROM keeping) k
)

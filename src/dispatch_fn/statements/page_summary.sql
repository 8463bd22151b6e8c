-- Ends both page statements: the page in one row, in store.PageResult's order.
-- Slots: {new_rows} (the rows written, or dry, missing) and {advanced_rows}
-- (the duties advanced, or dry, that would be).
--
-- Each CTE is scanned once. max(id) is taken in the database's own collation,
-- the one the page's ORDER BY used, so it is the next cursor. nothing_due (in
-- its window, yet owed nothing) is counted by difference: an anti-join between
-- two CTEs is planned blind, as a nested loop. Its DISTINCT sorts the page's
-- owed rows; in "C" that is a byte comparison, where a linguistic default
-- collation (such as en_US.UTF-8) would call strcoll for each, for the same count.
-- cut: the row budget ended the page before its size did (page_owed.sql's
-- page), so the range goes on after upto however few duties the page held.
SELECT d.upto, d.page_rows, d.duties, d.outside_window, d.in_window - o.owing, o.owed,
       (SELECT count(*) FROM {new_rows}),
       (SELECT count(*) FROM {advanced_rows}),
       d.cut
FROM (SELECT max(id) AS upto,
             count(*) AS page_rows,
             coalesce(bool_or(cut_after), false) AS cut,
             count(schedule_no) AS duties,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND NOT in_window) AS outside_window,
             count(*) FILTER (WHERE schedule_no IS NOT NULL AND in_window) AS in_window
      FROM placed) d,
     (SELECT count(*) AS owed, count(DISTINCT duty_id COLLATE "C") AS owing FROM owed) o

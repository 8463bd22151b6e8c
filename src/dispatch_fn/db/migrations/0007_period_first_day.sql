-- The first local day of a period, from its key alone: how the dispatcher
-- orders keys of different frequencies (page_write.sql's never-regress test
-- on last_dispatched_period). Within one frequency the fixed-width spelling
-- sorts chronologically, but across frequencies it does not: in "C" order
-- '2026-W46' sorts after '2026-12' ('W' > '1'), so a duty moved from weekly to
-- monthly kept its weekly key for good. Its answer is periods.period_days'
-- first day for every key the engine writes (tests/database/
-- test_period_first_day.py holds the two together).
--
-- YYYY, YYYY-MM, YYYY-MM-DD, YYYY-Qn, YYYY-Hn, and YYYY-Www (weekly, and
-- fortnightly, whose key names its first week): the Monday of ISO week ww,
-- counted from the Monday of the week holding January 4th. Any other spelling
-- (a hand-edited column) is null, never an error: one odd row must not fail
-- the page for every duty on it.
--
-- Plain date arithmetic, so IMMUTABLE is true of it (to_date is only STABLE),
-- and a single SELECT with no FROM and no STRICT, so the planner inlines it
-- into the statement instead of calling a function per row. EXECUTE is
-- PUBLIC's by default, the dispatcher's role included (tests/database/test_roles.py).
-- OR REPLACE: the function belongs to the schema, not to a table, so a
-- database whose tables were dropped and migrated again still has it.
CREATE OR REPLACE FUNCTION duly_period_first_day(period_key text) RETURNS date
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE
    WHEN period_key !~ '^[0-9]{4}(-([0-9]{2}(-[0-9]{2})?|W[0-9]{2}|Q[1-4]|H[12]))?$'
        OR left(period_key, 4) = '0000' THEN NULL
    WHEN length(period_key) = 4 THEN make_date(left(period_key, 4)::int, 1, 1)
    WHEN substr(period_key, 6, 1) = 'W' THEN
        make_date(left(period_key, 4)::int, 1, 4)
        - (extract(isodow FROM make_date(left(period_key, 4)::int, 1, 4))::int - 1)
        + (substr(period_key, 7, 2)::int - 1) * 7
    WHEN substr(period_key, 6, 1) = 'Q' THEN
        make_date(left(period_key, 4)::int, 3 * substr(period_key, 7, 1)::int - 2, 1)
    WHEN substr(period_key, 6, 1) = 'H' THEN
        make_date(left(period_key, 4)::int, 6 * substr(period_key, 7, 1)::int - 5, 1)
    WHEN substr(period_key, 6, 2)::int NOT BETWEEN 1 AND 12 THEN NULL
    WHEN length(period_key) = 7 THEN
        make_date(left(period_key, 4)::int, substr(period_key, 6, 2)::int, 1)
    -- A day past its month's end ('2026-02-30') is no key the engine writes;
    -- it reads as the days after the month's first, not as an error.
    ELSE make_date(left(period_key, 4)::int, substr(period_key, 6, 2)::int, 1)
         + (substr(period_key, 9, 2)::int - 1)
END
$$;

-- A duty set aside by a run that judged it afresh stays owed a fresh
-- judgement (docs/contract.md#account, docs/adr/0012), reproduced by tests
-- in tests/run/test_duty_accounts.py first.
--
-- A run whose rules differ from the previous run's (a new tzdata or holidays
-- release, new owed rules) judges every account it reads afresh; the runs
-- after it, their rules the same, read only the duties whose next owed day
-- has come. A duty whose row that first run found locked was never judged
-- afresh: a monthly duty whose current task someone deleted never had it
-- again, and one whose next owed day the new rules moved earlier was read
-- at the old one. The run now writes down, with each duty it sets aside,
-- whether it was judging that duty afresh; the next run reads those duties
-- whatever their next owed day and judges them afresh, and one it sets
-- aside again it writes down the same way.
--
-- One column on the set-aside ledger, whose default writes the catalog
-- alone (no row is rewritten; ACCESS EXCLUSIVE on that small table for
-- milliseconds, waiting at most lock_timeout to get it), and one function:
--
--   afresh           the run was judging the duty afresh when it set it aside.
--   duly_read_now    whether a run reads a duty: a scheduled run reads the
--                    duties whose next owed day has begun by its clock, and
--                    those still owed a fresh judgement. The pages, their
--                    bounds and the census each ask it, so all count the
--                    same duties.
SET lock_timeout = '5s';

ALTER TABLE duly_dispatch_set_aside
    ADD COLUMN IF NOT EXISTS afresh boolean NOT NULL DEFAULT false;

-- An inlined SQL function: with no duty owed a fresh judgement (every run
-- but the one after a set-aside under new rules) the last test folds away,
-- as the statement is planned with its values.
CREATE OR REPLACE FUNCTION duly_read_now(
    id text, next_at timestamptz, owed_at timestamptz, afresh text[])
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT owed_at IS NULL
    OR next_at <= owed_at
    OR (cardinality(afresh) > 0 AND id = ANY(afresh))
$$;

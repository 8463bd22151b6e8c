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
-- On a layout keyed by (organization_id, id) an id may repeat across
-- organisations (docs/adr/0005): the set-aside ledger kept one row per run
-- and id, so of two namesakes set aside in one run (one locked, one timed
-- out) it kept the first alone, and a fresh judgement owed to one would be
-- owed to both. Its rows now name the duty's organisation where the run
-- told it apart from a namesake (reproduced in tests/db/test_shard_keys.py).
--
-- Two columns on the set-aside ledger, one nullable and one whose default
-- writes the catalog alone (no row is rewritten), and its key, on that
-- small table (ACCESS EXCLUSIVE for as long as the index takes to build,
-- waiting at most lock_timeout to get it); and three functions:
--
--   organization_id    the duty's organisation; null: the duty is known by
--                      its id alone (no duty the run read shares it), and
--                      every row before this migration.
--   afresh             the run was judging the duty afresh when it set it aside.
--   duly_duty_key      a duty's organisation and id as one text, each
--                      recoverable (the organisation's length first), as the
--                      run passes the keys owed a fresh judgement and a page
--                      counts its owing duties; inlined (every operator in
--                      it immutable), so a sort compares text in "C".
--   duly_afresh        whether a duty is owed a fresh judgement: listed by
--                      id alone, or by its key.
--   duly_read_now      whether a run reads a duty: a scheduled run reads the
--                      duties whose next owed day has begun by its clock, and
--                      those owed a fresh judgement. The pages, their bounds
--                      and the census each ask it, so all count the same
--                      duties.
SET lock_timeout = '5s';

ALTER TABLE duly_dispatch_set_aside ADD COLUMN IF NOT EXISTS organization_id text;

ALTER TABLE duly_dispatch_set_aside
    ADD COLUMN IF NOT EXISTS afresh boolean NOT NULL DEFAULT false;

-- One row per run and duty: its id, and its organisation where known.
CREATE UNIQUE INDEX IF NOT EXISTS duly_dispatch_set_aside_key
    ON duly_dispatch_set_aside (run_id, duty_id, coalesce(organization_id, ''));

ALTER TABLE duly_dispatch_set_aside DROP CONSTRAINT IF EXISTS duly_dispatch_set_aside_pkey;

CREATE OR REPLACE FUNCTION duly_duty_key(organization_id text, id text)
    RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT length(organization_id)::text || ':' || organization_id || id
$$;

-- Inlined SQL functions: with no duty owed a fresh judgement (every run but
-- the one after a set-aside under new rules) each test folds away, as the
-- statement is planned with its values.
CREATE OR REPLACE FUNCTION duly_afresh(
    id text, organization_id text, afresh_ids text[], afresh_keys text[])
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT (cardinality(afresh_ids) > 0 AND id = ANY(afresh_ids))
    OR (cardinality(afresh_keys) > 0 AND duly_duty_key(organization_id, id) = ANY(afresh_keys))
$$;

CREATE OR REPLACE FUNCTION duly_read_now(
    id text, organization_id text, next_at timestamptz, owed_at timestamptz,
    afresh_ids text[], afresh_keys text[])
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT owed_at IS NULL
    OR next_at <= owed_at
    OR duly_afresh(id, organization_id, afresh_ids, afresh_keys)
$$;

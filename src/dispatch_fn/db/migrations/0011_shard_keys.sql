-- duly:no-transaction
-- Keys a sharded PostgreSQL can enforce (docs/adr/0005-scale.md): Aurora
-- Limitless, Citus and PostgreSQL's own partitioning refuse a unique key or a
-- foreign key that does not carry the shard key, organization_id. A task's
-- duty is therefore named by (organization_id, duty_id), which also holds a
-- task to its duty's organisation.
--
-- Each statement commits alone, so a live table of millions of duties and
-- tasks is never locked for the length of the migration:
--   1. the unique index is built CONCURRENTLY (inserts and updates go on);
--   2. attaching it as a constraint is a catalog update, under a lock held
--      for milliseconds;
--   3. the foreign key arrives NOT VALID (new rows are checked at once, no
--      scan), then VALIDATE scans the tasks under SHARE UPDATE EXCLUSIVE,
--      which lets reads, inserts and updates continue;
--   4. the old key, and the index the unique one replaces, are dropped.
-- The steps that need a strong lock wait at most lock_timeout for it rather
-- than queueing every other session behind a long query; one that times out
-- fails the migration, which is re-run from its start (every step is
-- re-runnable).
--
-- The primary keys stay as they are on this layout. duly_duty (id) keeps duty
-- ids unique across organisations, which the pages' keyset walk (id > last)
-- and a scope's duty_ids rely on; duly_task (id) is an identity, unique by its
-- sequence. Moving either key costs an ACCESS EXCLUSIVE rebuild and buys this
-- layout nothing. Where the tables are partitioned or sharded the keys must
-- carry organization_id (src/dispatch_fn/db/layouts/partitioned.sql), and the
-- uniqueness of duty ids across organisations is then the upstream id
-- generator's to keep.
--
-- The new foreign key needs no index of its own on duly_task: the dispatch
-- identity (organization_id, duty_id, owner_id, period_key) leads with its
-- columns, so a duty's delete still finds its tasks by index. A task whose
-- organisation differs from its duty's (a duty moved between organisations
-- after its tasks were made) fails VALIDATE: the constraint stays NOT VALID,
-- still checking every new row, the migration is not recorded, and the
-- operator decides which organisation those tasks belong to before re-running
-- it. From here on a duty with tasks cannot change organisation, as on a
-- sharded engine, where that would move it to another shard.

-- A build killed half way leaves an invalid index that IF NOT EXISTS would
-- take for done; dropping it is instant (it was never used by a query).
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_index
        WHERE indexrelid = to_regclass('duly_duty_organization_key') AND NOT indisvalid
    ) THEN
        DROP INDEX duly_duty_organization_key;
    END IF;
END
$$;

CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS duly_duty_organization_key
    ON duly_duty (organization_id, id);

DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint
        WHERE conrelid = 'duly_duty'::regclass AND conname = 'duly_duty_organization_key'
    ) THEN
        ALTER TABLE duly_duty
            ADD CONSTRAINT duly_duty_organization_key UNIQUE USING INDEX duly_duty_organization_key;
    END IF;
END
$$;

DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint
        WHERE conrelid = 'duly_task'::regclass AND conname = 'duly_task_duty'
    ) THEN
        ALTER TABLE duly_task
            ADD CONSTRAINT duly_task_duty FOREIGN KEY (organization_id, duty_id)
            REFERENCES duly_duty (organization_id, id) NOT VALID;
    END IF;
END
$$;

ALTER TABLE duly_task VALIDATE CONSTRAINT duly_task_duty;

DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    ALTER TABLE duly_task DROP CONSTRAINT IF EXISTS duly_task_duty_id_fkey;
END
$$;

-- Scoped runs page through one organisation's duties by (organization_id, id):
-- the unique index serves them as the old one did.
DROP INDEX CONCURRENTLY IF EXISTS duly_duty_organization;

-- duly_duty and duly_task hash-partitioned by organization_id into 8
-- partitions: the rule a sharded PostgreSQL (Aurora Limitless, Citus)
-- enforces, that every unique key and every foreign key carries the shard
-- key, enforced here by PostgreSQL itself (docs/adr/0005-scale.md). Not a
-- migration: the deployed functions never apply it. dispatch_fn.db.layout
-- applies it, in one transaction, to a freshly migrated database whose duties
-- and tasks are empty; the tests (DULY_LAYOUT=partitioned) and the bench
-- (--layout partitioned) run the dispatcher on it unchanged.
--
-- Each table is rebuilt LIKE the migrated one, so the columns, their order,
-- types, defaults, NOT NULLs, checks and the task id's identity are the
-- migrations' own; the keys, indexes, storage options and grants, which LIKE
-- cannot carry onto a partitioned table, are declared below, one for one
-- (tests/db/test_shard_keys.py compares both layouts from pg_catalog).

ALTER TABLE duly_task RENAME TO duly_task_plain;
ALTER TABLE duly_duty RENAME TO duly_duty_plain;

CREATE TABLE duly_duty (
    LIKE duly_duty_plain
    INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING IDENTITY
    INCLUDING STORAGE INCLUDING COMMENTS INCLUDING COMPRESSION
) PARTITION BY HASH (organization_id);

CREATE TABLE duly_task (
    LIKE duly_task_plain
    INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING IDENTITY
    INCLUDING STORAGE INCLUDING COMMENTS INCLUDING COMPRESSION
) PARTITION BY HASH (organization_id);

DROP TABLE duly_task_plain;
DROP TABLE duly_duty_plain;

-- The identity's sequence was named while the plain table still held
-- duly_task_id_seq; it takes that name back.
DO $$
BEGIN
    EXECUTE format(
        'ALTER SEQUENCE %s RENAME TO duly_task_id_seq',
        pg_get_serial_sequence('duly_task', 'id')
    );
END
$$;

-- A partitioned table holds no rows of its own, so the storage options
-- belong to each partition: duties keep 0002's room for HOT updates.
DO $$
BEGIN
    FOR remainder IN 0..7 LOOP
        EXECUTE format(
            'CREATE TABLE duly_duty_p%s PARTITION OF duly_duty'
            ' FOR VALUES WITH (MODULUS 8, REMAINDER %s) WITH (fillfactor = 50)',
            remainder, remainder
        );
        EXECUTE format(
            'CREATE TABLE duly_task_p%s PARTITION OF duly_task'
            ' FOR VALUES WITH (MODULUS 8, REMAINDER %s)',
            remainder, remainder
        );
    END LOOP;
END
$$;

-- The keys: each carries organization_id, the partition key, or PostgreSQL
-- refuses it. A duty id is unique within its organisation here, not across
-- organisations (migration 0011 says why the plain layout keeps both).
ALTER TABLE duly_duty ADD CONSTRAINT duly_duty_pkey PRIMARY KEY (organization_id, id);
ALTER TABLE duly_task ADD CONSTRAINT duly_task_pkey PRIMARY KEY (organization_id, id);
ALTER TABLE duly_task ADD CONSTRAINT duly_task_dispatch_identity
    UNIQUE (organization_id, duty_id, owner_id, period_key);
ALTER TABLE duly_task ADD CONSTRAINT duly_task_duty FOREIGN KEY (organization_id, duty_id)
    REFERENCES duly_duty (organization_id, id);

-- The indexes the statements rely on, as migrations 0006, 0014 and 0016 define them.
CREATE INDEX duly_duty_next_at
    ON duly_duty (id, dispatch_next_at) INCLUDE (organization_id)
    WHERE status = 'active' AND form = 'recurring' AND review_status = 'approved';
CREATE INDEX duly_duty_left_out
    ON duly_duty (form, status, review_status) INCLUDE (organization_id, id)
    WHERE status IS DISTINCT FROM 'active' OR form IS DISTINCT FROM 'recurring'
       OR review_status IS DISTINCT FROM 'approved';
CREATE INDEX duly_task_open_late
    ON duly_task (organization_id, late_after)
    WHERE status = 'open';

-- Each partition's index is named after the index it belongs to
-- (duly_duty_next_at_p3), so a plan or pg_stat_user_indexes
-- reads back to the definition above.
DO $$
DECLARE
    part record;
BEGIN
    FOR part IN
        SELECT child.relname AS name, parent.relname AS parent_name,
               substring(partition.relname FROM '_p[0-9]+$') AS suffix
        FROM pg_inherits i
        JOIN pg_class child ON child.oid = i.inhrelid
        JOIN pg_class parent ON parent.oid = i.inhparent
        JOIN pg_index x ON x.indexrelid = child.oid
        JOIN pg_class partition ON partition.oid = x.indrelid
        WHERE parent.relkind = 'I'
          AND parent.relname IN (
              'duly_duty_pkey', 'duly_duty_next_at', 'duly_duty_left_out', 'duly_task_pkey',
              'duly_task_dispatch_identity', 'duly_task_open_late')
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', part.name, part.parent_name || part.suffix);
    END LOOP;
END
$$;

-- Migrations 0005 and 0009's grants to this database's dispatcher role. The
-- dispatcher names only the partitioned tables, whose rights PostgreSQL checks
-- for every partition a statement reaches; the partitions grant nothing.
DO $$
BEGIN
    EXECUTE format('GRANT SELECT ON duly_duty TO %I', duly_dispatcher_role());
    EXECUTE format('GRANT UPDATE (last_dispatched_period, dispatch_through,'
                   ' dispatch_paused_on, dispatch_changed_on, dispatch_next, dispatch_owed_between,'
                   ' dispatch_next_at, dispatch_recast_on)'
                   ' ON duly_duty TO %I',
                   duly_dispatcher_role());
    EXECUTE format('GRANT SELECT, INSERT ON duly_task TO %I', duly_dispatcher_role());
END
$$;

-- Migration 0012's account marks: LIKE copies no trigger, and a row trigger on
-- the partitioned table fires for every partition.
CREATE TRIGGER duly_duty_account
    BEFORE INSERT OR UPDATE OF form, status, review_status, owner_id, organization_id,
        frequency, timezone, due_anchor, due_offset_days, due_offset_months, due_roll,
        holiday_calendar, lead_days, grace_days, effective_from, effective_to
    ON duly_duty
    FOR EACH ROW EXECUTE FUNCTION duly_duty_account_mark();
